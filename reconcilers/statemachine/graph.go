package statemachine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
)

// Arc is one declared edge, by state names.
type Arc struct{ From, To string }

// Graph reads the edge union named union from Go source src: every term
// Edge[F, T] (qualified or not, pointers or values) is one arc, in source
// order. It is how docs are generated from the declaration the compiler
// checks.
func Graph(src []byte, union string) ([]Arc, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var arcs []Arc
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != union {
			return true
		}
		found = true
		it, ok := ts.Type.(*ast.InterfaceType)
		if !ok {
			return false
		}
		for _, m := range it.Methods.List {
			if len(m.Names) == 0 {
				arcs = append(arcs, terms(m.Type)...)
			}
		}
		return false
	})
	if !found {
		return nil, fmt.Errorf("no type %s in the source", union)
	}
	if len(arcs) == 0 {
		return nil, fmt.Errorf("type %s names no Edge", union)
	}
	return arcs, nil
}

func terms(e ast.Expr) []Arc {
	switch x := e.(type) {
	case *ast.BinaryExpr:
		return append(terms(x.X), terms(x.Y)...)
	case *ast.IndexListExpr:
		if len(x.Indices) == 2 && typeName(x.X) == "Edge" {
			return []Arc{{From: typeName(x.Indices[0]), To: typeName(x.Indices[1])}}
		}
	}
	return nil
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// Mermaid renders arcs as a Mermaid state diagram, start marking the
// initial state. Arcs from every state but start to the same target are
// drawn once each, in order, so the output is stable.
func Mermaid(start string, arcs []Arc) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", start)
	seen := map[Arc]bool{}
	for _, a := range arcs {
		if seen[a] {
			continue
		}
		seen[a] = true
		fmt.Fprintf(&b, "    %s --> %s\n", a.From, a.To)
	}
	return b.String()
}

// States lists the states arcs name, in order of first appearance.
func States(arcs []Arc) []string {
	var out []string
	for _, a := range arcs {
		for _, s := range []string{a.From, a.To} {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}
