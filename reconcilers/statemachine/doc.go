// Package statemachine runs typed state machines whose allowed transitions
// the compiler checks.
//
// A state is a Go type with one handler, Handle, that does the state's work
// and returns the step to the next state. A machine declares its edges once,
// as a union of Edge types in a constraint, and routes every step through
// one generic function constrained by that union:
//
//	type edges interface {
//		statemachine.Edge[Closed, Open] | statemachine.Edge[Open, Closed]
//		statemachine.Transition
//	}
//
//	func next[E edges](e E) statemachine.Step[*Door] { return statemachine.Go[*Door](e) }
//
// A handler moves with next(statemachine.Move(s, Open{})). A move along an
// edge the union does not name does not build ("Edge[Closed, Locked] does
// not satisfy edges"). Run checks at run time the one thing the compiler
// cannot: that a handler moves from its own state.
//
// The package does no I/O and reads no clock: handlers reach the world only
// through their subject, so a test drives a machine with a fake one. Graph
// reads the union from the machine's source, and Mermaid renders it, so the
// documentation is generated from the same declaration the compiler checks.
package statemachine
