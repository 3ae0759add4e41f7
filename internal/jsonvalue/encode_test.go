package jsonvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// The values the Kubernetes API shows, and the corners of encoding/json's
// output: escapes, HTML characters, invalid UTF-8, number formats.
var cases = []any{
	nil, true, false, "", "plain", `quote " back \ slash`, "<a href='x'>&amp;</a>",
	"\b\f\n\r\t\x00\x01\x1f\x7f", "\u2028\u2029", "héllo wörld ✓ 𝄞", "bad \xff\xfe utf8 \xc3",
	0.0, math.Copysign(0, -1), 1.0, -1.0, 0.5, 1e-6, 1e-7, 123456789e-15, 1e20, 1e21, 1e22,
	-1e21, 1e15, 1e15 + 1, 9007199254740991.0, 9007199254740993.0, 3.14159, 1.0 / 3, math.MaxFloat64,
	math.SmallestNonzeroFloat64, int64(0), int64(-42), int64(math.MaxInt64), 7,
	[]any{}, []any(nil), map[string]any{}, map[string]any(nil),
	[]byte("bytes"), map[string]string{"b": "2", "a": "1"}, []string{"x"}, json.Number("12.50"),
	map[string]any{"z": 1.0, "a": []any{"x", nil, map[string]any{"<k>": "v", "": false}}, "m": map[string]any{"é": "\u2028"}},
}

func TestMarshalAsEncodingJSON(t *testing.T) {
	for _, v := range cases {
		checkSame(t, v)
	}
}

func TestMarshalRandomValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		checkSame(t, randomValue(r, 0))
	}
}

func TestMarshalRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"a": []any{math.Inf(-1)}}, make(chan int)} {
		if _, err := Marshal(v); err == nil {
			t.Errorf("Marshal(%v): no error, encoding/json gives one", v)
		}
	}
}

func FuzzMarshalString(f *testing.F) {
	for _, s := range []string{"", "a<b>&", "\xff", "\u2028", "\x7f\x00"} {
		f.Add(s, 1.5)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		checkSame(t, map[string]any{s: []any{s, x}})
	})
}

func checkSame(t *testing.T, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", v, err)
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal(%#v)\n got %s\nwant %s", v, got, want)
	}
}

const alphabet = "aZ09 <>&\"\\\n\t\x01\x7fé✓\u2028𝄞\xff"

func randomValue(r *rand.Rand, depth int) any {
	n := r.IntN(10)
	if depth > 4 {
		n = r.IntN(6)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return randomString(r)
	case 3:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7ff))<<52)
	case 4:
		return float64(r.IntN(1<<20) - 1<<19)
	case 5:
		return r.Int64() - math.MaxInt64/2
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(6) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(5))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
}

func randomString(r *rand.Rand) string {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// A value that contains itself is an error, as json.Marshal gives, not a
// stack overflow.
func TestAppendCycleIsAnError(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	if _, err := Append(nil, m); err == nil {
		t.Fatal("a map that contains itself encoded without an error")
	}
	l := []any{nil}
	l[0] = l
	if _, err := Append(nil, l); err == nil {
		t.Fatal("a list that contains itself encoded without an error")
	}
}
