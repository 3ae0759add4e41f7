package pod

import (
	"flag"
	"os"
	"strings"
	"testing"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
)

var update = flag.Bool("update", false, "rewrite docs/pods.md's state graph from states.go")

const (
	graphDoc   = "../../docs/pods.md"
	graphBegin = "<!-- state graph: generated from reconcilers/pod/states.go by `go test ./reconcilers/pod -run TestGraphDocIsCurrent -update` -->\n```mermaid\n"
	graphEnd   = "```\n<!-- end of state graph -->"
)

// TestGraphDocIsCurrent renders the pod machine's edges, as declared for
// the compiler, into docs/pods.md, and fails when the doc shows another
// graph.
func TestGraphDocIsCurrent(t *testing.T) {
	src, err := os.ReadFile("states.go")
	if err != nil {
		t.Fatal(err)
	}
	arcs, err := sm.Graph(src, "edges")
	if err != nil {
		t.Fatal(err)
	}
	want := sm.Mermaid("Registered", arcs)
	doc, err := os.ReadFile(graphDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, graphBegin)
	j := strings.Index(text, graphEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated state graph block", graphDoc)
	}
	got := text[i+len(graphBegin) : j]
	if got == want {
		return
	}
	if *update {
		text = text[:i+len(graphBegin)] + want + text[j:]
		if err := os.WriteFile(graphDoc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is stale; run go test ./reconcilers/pod -run TestGraphDocIsCurrent -update\ngot:\n%s\nwant:\n%s", graphDoc, got, want)
}
