package manifest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// yamlValue is what the YAML path makes of raw.
func yamlValue(raw []byte) (any, bool) {
	root, perr := parseYAML(raw, 0)
	if perr != nil || root == nil {
		return nil, false
	}
	conv := converter{}
	v, err := conv.value(root, "", 0)
	return v, err == nil
}

// checkParity fails when the JSON fast path accepts raw but the YAML path
// would have produced anything else.
func checkParity(t *testing.T, raw []byte) bool {
	t.Helper()
	fast, err := fastJSON(raw)
	if err != nil {
		return false
	}
	slow, ok := yamlValue(raw)
	if !ok {
		t.Fatalf("fast path accepted what the YAML path rejects: %s", raw)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path differs from the YAML path for %s:\nfast %#v\nyaml %#v", raw, fast, slow)
	}
	return true
}

func randomJSON(r *rand.Rand, depth int) any {
	strs := []string{"", "a", "yes", "no", "on", "null", "~", "1e3", "0x10", "2026-11-22T10:00:00Z", "a: b", "- x", "#c", "日本", "\"q\"", "\\", "\t", "<<"}
	switch k := r.IntN(8); {
	case k == 0 && depth < 4:
		m := map[string]any{}
		for range r.IntN(5) {
			m[strs[r.IntN(len(strs))]+fmt.Sprint(r.IntN(3))] = randomJSON(r, depth+1)
		}
		return m
	case k == 1 && depth < 4:
		var l []any
		for range r.IntN(4) {
			l = append(l, randomJSON(r, depth+1))
		}
		return l
	case k == 2:
		return r.IntN(2) == 0
	case k == 3:
		return nil
	case k == 4:
		return float64(r.Int64N(1<<54) - 1<<53)
	case k == 5:
		return r.Float64() * 1e6
	default:
		return strs[r.IntN(len(strs))]
	}
}

func TestFastJSONMatchesYAML(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	accepted := 0
	for range 3000 {
		doc := map[string]any{"apiVersion": "v1", "kind": "Thing", "metadata": map[string]any{"name": "x"}, "spec": randomJSON(r, 0)}
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if checkParity(t, raw) {
			accepted++
		}
	}
	if accepted < 2900 {
		t.Fatalf("the fast path took only %d of 3000 plain JSON documents", accepted)
	}
	// Inputs the fast path must leave to the YAML path.
	for _, raw := range []string{
		`{"a": 1, "a": 2}`, `{"n": 123456789012345678901}`, `{"n": 1e400}`, `{"a": 1} x`,
		`{"a": [1, 2}`, `{"a": "\ud800"}`, `["not", "an", "object"]`,
		`{"a": 1}}`, `{"a": 1} {"b": 2}`, `{"a": 1}  ]`, "{\"a\": 1}\n\n,",
	} {
		if _, err := fastJSON([]byte(raw)); err == nil {
			t.Errorf("fast path accepted %s", raw)
		}
	}
}

func FuzzFastJSONParity(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,2.5,"x",null,true]}`, `{"":{"<<":{}}}`, `{"n":-9007199254740992}`, `{"s":"2026-11-22"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParity(t, []byte(s))
	})
}
