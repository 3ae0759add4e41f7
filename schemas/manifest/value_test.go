package manifest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// DecodeValue must give what Decode gives for json.Marshal of the same
// value: the same objects, or the same errors.
func TestDecodeValueAsDecodeOfItsJSON(t *testing.T) {
	meta := func(name string) map[string]any { return map[string]any{"name": name, "namespace": "ns"} }
	deep := map[string]any{}
	for cur, i := deep, 0; i < maxDepth+2; i++ {
		next := map[string]any{}
		cur["a"] = next
		cur = next
	}
	cases := map[string]map[string]any{
		"config map": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "v <&> \u2028"}},
		"defined kind": {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": map[string]any{"name": "o-1", "namespace": "default",
			"annotations": map[string]any{"kubeapi.jetplane.dev/managed-fields": `[{"manager":"crbench","operation":"Update"}]`}},
			"spec": map[string]any{"size": 1.0, "ratio": 0.25, "tiny": 1e-7, "neg": -3.0, "list": []any{true, false, nil, "x"}}},
		"deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("d"), "spec": map[string]any{
			"replicas": 2.0, "selector": map[string]any{"matchLabels": map[string]any{"app": "d"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "d"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}}},
		"unknown top-level field": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "bogus": 1.0},
		"no name":                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}},
		"no kind":                 {"apiVersion": "v1", "metadata": meta("a")},
		"metadata a string":       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "a"},
		"a list":                  {"apiVersion": "v1", "kind": "List", "items": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a")}, "x"}},
		"number beyond 2^53":      {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": map[string]any{"n": 1e17}},
		"number at 2^53":          {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": map[string]any{"n": float64(1 << 53)}},
		"minus zero":              {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": map[string]any{"n": math.Copysign(0, -1)}},
		"huge number":             {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": map[string]any{"n": 1e300}},
		"DEL":                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "a\x7fb"}},
		"C1 control":              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "a\u0086b"}},
		"NEL":                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "a\u0085b"}},
		"U+FFFE":                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "a\ufffeb"}},
		"invalid UTF-8":           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "a\xffb"}},
		"controls":                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": "\x00\x01\t\n\r\"\\"}},
		"surrogate text":          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": `\ud83d`}},
		"surrogate text in a key": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{`x\uDC00`: "v"}},
		"non-surrogate escape":    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": `\u0041 \ud7ff \uE000`}},
		"deep":                    {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": deep},
		"over a MiB":              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": strings.Repeat("<", MaxObjectBytes/6+10)}},
		"just under a MiB":        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": map[string]any{"k": strings.Repeat("x", MaxObjectBytes-200)}},
		"another type":            {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": meta("a"), "spec": map[string]any{"n": int64(3)}},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) { checkDecodeValue(t, v) })
	}
	// What API clients send takes the path without text.
	for _, name := range []string{"config map", "defined kind", "deployment", "controls", "NEL", "non-surrogate escape", "just under a MiB"} {
		if _, ok := plainSize(cases[name], 0); !ok {
			t.Errorf("%s: DecodeValue encodes it as text", name)
		}
	}
}

func TestDecodeValueRandomSpecs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		v := map[string]any{"apiVersion": "example.com/v1", "kind": "Probe",
			"metadata": map[string]any{"name": "o", "namespace": "default", "labels": map[string]any{randomText(r): randomText(r)}},
			"spec":     randomSpec(r, 0)}
		checkDecodeValue(t, v)
	}
}

// The size DecodeValue computes is the length of json.Marshal's text.
func TestPlainSizeIsTheEncodedLength(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		v := randomSpec(r, 0)
		n, ok := plainSize(v, 0)
		if !ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(b) {
			t.Fatalf("plainSize(%s) = %d, json.Marshal writes %d bytes", b, n, len(b))
		}
	}
}

func checkDecodeValue(t *testing.T, v map[string]any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want, wantErr := Decode("request body", b)
	got, gotErr := DecodeValue("request body", v)
	if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
		t.Fatalf("DecodeValue(%.300s): error %v, Decode of its JSON: %v", b, gotErr, wantErr)
	}
	if len(got) != len(want) {
		t.Fatalf("DecodeValue(%.300s): %d objects, Decode of its JSON: %d", b, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("DecodeValue(%.300s): object %d is\n%v\nDecode of its JSON:\n%v", b, i, got[i], want[i])
		}
	}
}

const textRunes = "aZ09 <>&\"\\\n\t\x01\x7fé✓\u0085\u0086\u2028\ufffe𝄞"

func randomText(r *rand.Rand) string {
	runes := []rune(textRunes)
	var b strings.Builder
	b.WriteString("k")
	for range r.IntN(6) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	if r.IntN(20) == 0 {
		b.WriteString(`\ud800`)
	}
	return b.String()
}

func randomSpec(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(5) {
		var v any
		switch r.IntN(8) {
		case 0:
			v = nil
		case 1:
			v = r.IntN(2) == 0
		case 2:
			v = randomText(r)
		case 3:
			v = float64(r.Int64N(1<<54) - 1<<53)
		case 4:
			v = math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(900+r.IntN(250))<<52)
		case 5:
			if depth < 4 {
				v = randomSpec(r, depth+1)
			}
		default:
			l := []any{randomText(r), float64(r.IntN(100))}
			if depth < 4 {
				l = append(l, randomSpec(r, depth+1))
			}
			v = l
		}
		m[randomText(r)] = v
	}
	return m
}

// DecodeValue reads the value it is given and never changes it: a kind's
// top-level content moved under spec goes into a copy of spec.
func TestDecodeValueLeavesItsInputAlone(t *testing.T) {
	spec := map[string]any{"x": "y"}
	v := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "d"},
		"data":     map[string]any{"k": "v"},
		"spec":     spec,
	}
	_, _ = DecodeValue("body", v) // refused (a ConfigMap has no spec.x), or not
	if len(spec) != 1 || spec["x"] != "y" {
		t.Fatalf("DecodeValue changed its input's spec: %v", spec)
	}
}
