package projections

import (
	"fmt"
	"slices"
	"strings"
)

// Selector matches objects by label, with the Kubernetes syntax: a
// comma-separated list of requirements "k=v", "k==v", "k!=v", "k in (a,b)",
// "k notin (a,b)", "k" (exists) and "!k" (does not exist), all of which must
// hold. The zero Selector matches everything.
type Selector struct {
	reqs []requirement
}

type op int

const (
	opIn op = iota
	opNotIn
	opExists
	opNotExists
)

type requirement struct {
	key    string
	op     op
	values []string
}

// ParseSelector parses a label selector; the error names the requirement
// that is malformed.
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	for _, part := range splitRequirements(s) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, err := parseRequirement(part)
		if err != nil {
			return Selector{}, fmt.Errorf("label selector %q: %w", part, err)
		}
		sel.reqs = append(sel.reqs, r)
	}
	return sel, nil
}

// splitRequirements splits on commas outside parentheses.
func splitRequirements(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseRequirement(p string) (requirement, error) {
	if strings.HasPrefix(p, "!") {
		k := strings.TrimSpace(p[1:])
		if !validSelectorKey(k) {
			return requirement{}, fmt.Errorf("bad label key %q", k)
		}
		return requirement{key: k, op: opNotExists}, nil
	}
	for _, o := range []struct {
		sep string
		op  op
	}{{"!=", opNotIn}, {"==", opIn}, {"=", opIn}} {
		if k, v, ok := strings.Cut(p, o.sep); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !validSelectorKey(k) {
				return requirement{}, fmt.Errorf("bad label key %q", k)
			}
			if strings.ContainsAny(v, "=!(), ") {
				return requirement{}, fmt.Errorf("bad label value %q", v)
			}
			return requirement{key: k, op: o.op, values: []string{v}}, nil
		}
	}
	fields := strings.Fields(p)
	if len(fields) == 1 {
		if !validSelectorKey(fields[0]) {
			return requirement{}, fmt.Errorf("bad label key %q", fields[0])
		}
		return requirement{key: fields[0], op: opExists}, nil
	}
	if len(fields) >= 2 && (fields[1] == "in" || fields[1] == "notin") {
		k := fields[0]
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p[len(k):]), fields[1]))
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return requirement{}, fmt.Errorf("want %s (v1,v2,...)", fields[1])
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			return requirement{}, fmt.Errorf("%s needs at least one value", fields[1])
		}
		o := opIn
		if fields[1] == "notin" {
			o = opNotIn
		}
		return requirement{key: k, op: o, values: vals}, nil
	}
	return requirement{}, fmt.Errorf("want k=v, k!=v, k in (...), k notin (...), k or !k")
}

func validSelectorKey(k string) bool {
	return k != "" && !strings.ContainsAny(k, " =!(),")
}

// Empty reports whether the selector matches everything.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.reqs {
		v, ok := labels[r.key]
		switch r.op {
		case opIn:
			if !ok || !slices.Contains(r.values, v) {
				return false
			}
		case opNotIn:
			if ok && slices.Contains(r.values, v) {
				return false
			}
		case opExists:
			if !ok {
				return false
			}
		case opNotExists:
			if ok {
				return false
			}
		}
	}
	return true
}

// equality returns one key=value requirement usable with the label index.
func (s Selector) equality() (key, value string, ok bool) {
	for _, r := range s.reqs {
		if r.op == opIn && len(r.values) == 1 {
			return r.key, r.values[0], true
		}
	}
	return "", "", false
}
