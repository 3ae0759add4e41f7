package statemachine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
)

// A turnstile: Locked until a coin, Open until someone passes, and Broken
// from anywhere when the subject says so.
type turnstile struct {
	coins, pushes []bool // scripted inputs, consumed in order
	broken        bool
}

type Locked struct{}
type Open struct{ Passed int }
type Broken struct{ Reason string }

type turnstileEdges interface {
	sm.Edge[Locked, Open] | sm.Edge[Open, Locked] | sm.Edge[Locked, Broken] | sm.Edge[Open, Broken]
	sm.Transition
}

func next[E turnstileEdges](e E) sm.Step[*turnstile] { return sm.Go[*turnstile](e) }

func (s Locked) Handle(_ context.Context, t *turnstile) sm.Step[*turnstile] {
	if t.broken {
		return next(sm.Move(s, Broken{Reason: "jammed"}))
	}
	if len(t.coins) == 0 {
		return sm.Done[*turnstile]()
	}
	t.coins = t.coins[1:]
	return next(sm.Move(s, Open{}))
}

func (s Open) Handle(_ context.Context, t *turnstile) sm.Step[*turnstile] {
	if len(t.pushes) == 0 {
		t.broken = true
		return next(sm.Move(s, Broken{Reason: "nobody came"}))
	}
	t.pushes = t.pushes[1:]
	return next(sm.Move(s, Locked{}))
}

func (Broken) Handle(context.Context, *turnstile) sm.Step[*turnstile] { return sm.Done[*turnstile]() }

func TestRunEntersEveryStateInOrder(t *testing.T) {
	tests := []struct {
		name string
		t    turnstile
		want string
	}{
		{"no coin", turnstile{}, "Locked"},
		{"one pass", turnstile{coins: []bool{true}, pushes: []bool{true}}, "Locked Open Locked"},
		{"two passes", turnstile{coins: []bool{true, true}, pushes: []bool{true, true}}, "Locked Open Locked Open Locked"},
		{"coin, nobody", turnstile{coins: []bool{true}}, "Locked Open Broken"},
		{"jammed", turnstile{broken: true}, "Locked Broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			end := sm.Run(context.Background(), &tt.t, sm.State[*turnstile](Locked{}), func(s sm.State[*turnstile]) {
				got = append(got, sm.Name(s))
			})
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("entered %q, want %q", g, tt.want)
			}
			if sm.Name(end) != tt.want[strings.LastIndex(tt.want, " ")+1:] {
				t.Fatalf("ended in %s", sm.Name(end))
			}
		})
	}
}

// liar moves from a state other than its own: the compiler allows the edge
// (it is declared) but Run refuses it.
type liar struct{}

func (liar) Handle(context.Context, *turnstile) sm.Step[*turnstile] {
	return next(sm.Move(Open{}, Locked{}))
}

func TestRunRefusesAMoveFromAnotherState(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "moved from Open") {
			t.Fatalf("recovered %v, want a panic naming the wrong source", r)
		}
	}()
	sm.Run(context.Background(), &turnstile{}, sm.State[*turnstile](liar{}), func(sm.State[*turnstile]) {})
}

func TestGraphReadsTheUnion(t *testing.T) {
	src, err := os.ReadFile("machine_test.go")
	if err != nil {
		t.Fatal(err)
	}
	arcs, err := sm.Graph(src, "turnstileEdges")
	if err != nil {
		t.Fatal(err)
	}
	want := "stateDiagram-v2\n    [*] --> Locked\n    Locked --> Open\n    Open --> Locked\n    Locked --> Broken\n    Open --> Broken\n"
	if got := sm.Mermaid("Locked", arcs); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := strings.Join(sm.States(arcs), ","); got != "Locked,Open,Broken" {
		t.Fatalf("states %s", got)
	}
	if _, err := sm.Graph(src, "noSuchUnion"); err == nil {
		t.Fatal("a missing union must be an error")
	}
}

// TestUndeclaredEdgeDoesNotBuild compiles, in a temporary module holding a
// copy of this package, a machine that moves along an edge its union does
// not declare, and expects the compiler to refuse it by name.
func TestUndeclaredEdgeDoesNotBuild(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to compile the snippet: %v", err)
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "statemachine")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"doc.go", "machine.go", "graph.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module snippet\n\ngo 1.24\n")
	const machine = `package main

import (
	"context"

	sm "snippet/statemachine"
)

type Locked struct{}
type Open struct{}
type Broken struct{}

type edges interface {
	sm.Edge[Locked, Open] | sm.Edge[Open, Locked]
	sm.Transition
}

func next[E edges](e E) sm.Step[int] { return sm.Go[int](e) }

func (s Locked) Handle(context.Context, int) sm.Step[int] { return next(sm.Move(s, %s)) }
func (s Open) Handle(context.Context, int) sm.Step[int]   { return next(sm.Move(s, Locked{})) }
func (Broken) Handle(context.Context, int) sm.Step[int]   { return sm.Done[int]() }

func main() { sm.Run(context.Background(), 0, sm.State[int](Locked{}), func(sm.State[int]) {}) }
`
	build := func() (string, error) {
		cmd := exec.Command(goBin, "build", "-o", os.DevNull, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The declared edge builds: the snippet itself is sound.
	write("main.go", strings.Replace(machine, "%s", "Open{}", 1))
	if out, err := build(); err != nil {
		t.Fatalf("the declared edge does not build: %v\n%s", err, out)
	}
	write("main.go", strings.Replace(machine, "%s", "Broken{}", 1))
	out, err := build()
	if err == nil {
		t.Fatal("an undeclared edge Locked → Broken built")
	}
	if !strings.Contains(out, "Edge[Locked, Broken] does not satisfy edges") {
		t.Fatalf("the compiler refused for another reason:\n%s", out)
	}
}
