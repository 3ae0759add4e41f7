package statemachine

import (
	"context"
	"fmt"
	"reflect"
)

// State is one state of a machine over subject S (what the machine drives,
// e.g. one pod on a node).
type State[S any] interface {
	// Handle does the state's work and returns the step to the next state;
	// the zero Step ends the machine (a final state).
	Handle(ctx context.Context, s S) Step[S]
}

// Transition is what every Edge is; a machine's edge union embeds it so
// that its transition function can read the edge's ends.
type Transition interface {
	From() any
	To() any
}

// Edge is the transition from state type F to state type T. Its only use
// is as a term of a machine's edge union and as the argument of the
// machine's transition function.
type Edge[F, T any] struct {
	from F
	to   T
}

// From is the state the edge leaves.
func (e Edge[F, T]) From() any { return e.from }

// To is the state the edge enters.
func (e Edge[F, T]) To() any { return e.to }

// Move is the edge from the current state from to the state to. It builds
// for any pair; only a machine's transition function, constrained by its
// edge union, decides which pairs are allowed.
func Move[F, T any](from F, to T) Edge[F, T] { return Edge[F, T]{from: from, to: to} }

// Step is a handler's result: the edge taken, or nothing (the machine ends).
type Step[S any] struct {
	from any
	to   State[S]
}

// Go turns an edge into a step. Call it only from a machine's transition
// function (the one whose constraint is the machine's edge union); calling
// it elsewhere skips the compile-time check. It panics when the edge's
// target is not a State[S]: a machine declaring such an edge is broken.
func Go[S any](e Transition) Step[S] {
	to, ok := e.To().(State[S])
	if !ok {
		panic(fmt.Sprintf("statemachine: %T is not a state of this machine", e.To()))
	}
	return Step[S]{from: e.From(), to: to}
}

// Done is the step that ends the machine.
func Done[S any]() Step[S] { return Step[S]{} }

// Next is the state a step enters (nil when the step ends the machine).
func (s Step[S]) Next() State[S] { return s.to }

// Name is a state's name: its type's name, without package or pointer.
func Name(state any) string {
	t := reflect.TypeOf(state)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "<nil>"
	}
	return t.Name()
}

// Run drives s from start until a handler ends the machine, or ctx ends
// with a handler that returns no step. enter is called with every state
// entered, start included, before its handler runs: it is the one place a
// machine's observable state (a pod's status) is recorded. Run panics when
// a handler moves from a state other than its own, which the compiler
// cannot see.
func Run[S any](ctx context.Context, s S, start State[S], enter func(State[S])) State[S] {
	state := start
	for {
		enter(state)
		step := state.Handle(ctx, s)
		if step.to == nil {
			return state
		}
		if reflect.TypeOf(step.from) != reflect.TypeOf(state) {
			panic(fmt.Sprintf("statemachine: %s moved from %s; a handler moves only from its own state", Name(state), Name(step.from)))
		}
		state = step.to
	}
}
