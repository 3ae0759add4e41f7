package manifest

import (
	"slices"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// KeyOf returns the key of o: its kind qualified by the API group taken from
// apiVersion ("apps/v1" + Deployment → "Deployment.apps"; "v1" + Service →
// "Service"), its namespace and its name. The group is part of the key because
// two groups may define the same kind name.
func KeyOf(o *schemas.Object) *schemas.ObjectKey { return projections.ObjectKey(o).Proto() }

// KeyString formats a key as "Kind/namespace/name", or "Kind/name" for a
// cluster-scoped object. Neither kinds, namespaces nor names may contain '/',
// so the two forms cannot be confused.
func KeyString(k *schemas.ObjectKey) string { return projections.KeyOf(k).String() }

// FindCycle returns one dependency cycle in edges (key → keys it depends on)
// as a path that starts and ends with the same key, such as [a b c a], or nil
// when there is none. The answer is deterministic: the cycle found first in
// sorted order, rotated to start at its smallest key, so the same state gives
// the same error message on every gate instance. FindCycle does not modify
// edges and is safe for concurrent use.
func FindCycle(edges map[string][]string) []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make(map[string]int, len(edges))
	type frame struct {
		node string
		next []string // neighbours still to visit, sorted
	}
	sortedNext := func(n string) []string {
		next := slices.Clone(edges[n])
		slices.Sort(next)
		return slices.Compact(next)
	}
	// Iterative, so a long dependency chain cannot exhaust the stack.
	for _, start := range sortedKeys(edges) {
		if state[start] != unvisited {
			continue
		}
		stack := []frame{{start, sortedNext(start)}}
		state[start] = onPath
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				state[top.node] = done
				stack = stack[:len(stack)-1]
				continue
			}
			n := top.next[0]
			top.next = top.next[1:]
			switch state[n] {
			case onPath:
				i := slices.IndexFunc(stack, func(f frame) bool { return f.node == n })
				cycle := make([]string, 0, len(stack)-i+1)
				for _, f := range stack[i:] {
					cycle = append(cycle, f.node)
				}
				return rotateToMin(cycle)
			case unvisited:
				state[n] = onPath
				stack = append(stack, frame{n, sortedNext(n)})
			}
		}
	}
	return nil
}

// rotateToMin takes a cycle without its closing repeat and returns it
// starting at its smallest key, closed.
func rotateToMin(cycle []string) []string {
	m := 0
	for i, k := range cycle {
		if k < cycle[m] {
			m = i
		}
	}
	out := make([]string, 0, len(cycle)+1)
	out = append(out, cycle[m:]...)
	out = append(out, cycle[:m]...)
	return append(out, out[0])
}
