package jsonvalue

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

var documents = []string{
	`{}`, ` { } `, `[]`, `{"a":1}`, `{"a":[1,2.5,-3e2,0,-0,1E+2,1e-7,true,false,null,"s",{},[]]}`,
	`{"apiVersion":"example.com/v1","kind":"Probe","metadata":{"name":"o-1","namespace":"default","managedFields":[{"manager":"crbench","operation":"Update","apiVersion":"example.com/v1","time":"2026-11-27T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:size":{}}}}]},"spec":{"size":1}}`,
	"{\"esc\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u2028\\u0000\"}", `{"dup":1,"dup":2}`, `{"utf8":"héllo ✓ 𝄞"}`,
	`{"sur":"\ud83d\ude00"}`, `{"lone":"\ud800"}`, `{"lone2":"\udc00x"}`, "{\"bad\":\"\xff\"}", "{\"badkey\xfe\":1}",
	`{"big":1e400}`, `{"big":-1e400}`, `{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":+1}`, `{"n":0x10}`,
	`{"a":1,}`, `{"a":1 "b":2}`, `{"a"}`, `{"a":}`, `{a:1}`, `[1,]`, `{"a":1}x`, `{"a":1}{}`, `{"a":tru}`, `{"a":nul}`,
	"{\"ctl\":\"a\tb\"}", "{\"ctl\":\"a\nb\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `"s"`, `1`, `null`, ``, ` `, `{`, `[`,
	`{"a":[{"b":[{"c":[]}]}]}`, "\t{\n\"a\"\r:\n1\t}\n",
}

func TestUnmarshalAsEncodingJSON(t *testing.T) {
	for _, doc := range documents {
		checkUnmarshal(t, []byte(doc))
	}
}

func TestUnmarshalRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		b, err := json.Marshal(map[string]any{"v": randomValue(r, 0)})
		if err != nil {
			continue
		}
		checkUnmarshal(t, b)
		// And with one byte changed: mostly errors, which must be
		// encoding/json's.
		c := append([]byte(nil), b...)
		const bytes = "{}[]\",:0-e.\\ua"
		c[r.IntN(len(c))] = bytes[r.IntN(len(bytes))]
		checkUnmarshal(t, c)
	}
}

func TestUnmarshalMergesAsEncodingJSON(t *testing.T) {
	m := map[string]any{"kept": true}
	if err := Unmarshal([]byte(`{"a":1}`), &m); err != nil || m["kept"] != true || m["a"] != 1.0 {
		t.Fatalf("Unmarshal into a map holding a key: %v, %v", m, err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, doc := range documents {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkUnmarshal(t, b) })
}

func checkUnmarshal(t *testing.T, b []byte) {
	t.Helper()
	var wantM, gotM map[string]any
	wantErr, gotErr := json.Unmarshal(b, &wantM), Unmarshal(b, &gotM)
	if !sameError(gotErr, wantErr) || !reflect.DeepEqual(gotM, wantM) {
		t.Errorf("Unmarshal(%q) into a map: %#v, %v; encoding/json: %#v, %v", b, gotM, gotErr, wantM, wantErr)
	}
	var wantL, gotL []any
	wantErr, gotErr = json.Unmarshal(b, &wantL), Unmarshal(b, &gotL)
	if !sameError(gotErr, wantErr) || !reflect.DeepEqual(gotL, wantL) {
		t.Errorf("Unmarshal(%q) into a list: %#v, %v; encoding/json: %#v, %v", b, gotL, gotErr, wantL, wantErr)
	}
}

func sameError(a, b error) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Error() == b.Error()
}

// A non-nil map is filled, as encoding/json fills it: others sharing it
// see the keys.
func TestUnmarshalFillsTheMapGiven(t *testing.T) {
	m := map[string]any{}
	shared := m
	if err := Unmarshal([]byte(`{"a":1}`), &m); err != nil {
		t.Fatal(err)
	}
	if shared["a"] != float64(1) {
		t.Fatalf("the map given was not filled: %v", shared)
	}
}

// Parse's options: a repeated key and nesting past MaxDepth are refused,
// numbers go through Number, and the end is where the value ended.
func TestParseOptions(t *testing.T) {
	if _, _, ok := Parse([]byte(`{"a":1,"a":2}`), Options{UniqueKeys: true}); ok {
		t.Error("a repeated key was taken with UniqueKeys")
	}
	if v, _, ok := Parse([]byte(`{"a":1,"a":2}`), Options{}); !ok || v.(map[string]any)["a"] != float64(2) {
		t.Errorf("without UniqueKeys: %v %v, want the last value", v, ok)
	}
	if _, _, ok := Parse([]byte(`[[[1]]]`), Options{MaxDepth: 2}); ok {
		t.Error("nesting past MaxDepth was taken")
	}
	v, end, ok := Parse([]byte(` {"n": 12} x`), Options{Number: func(s string) (any, bool) { return "n" + s, true }})
	if !ok || v.(map[string]any)["n"] != "n12" || end != 10 {
		t.Errorf("Parse = %v, %d, %v", v, end, ok)
	}
	if _, _, ok := Parse([]byte(`1e999`), Options{Number: func(string) (any, bool) { return nil, false }}); ok {
		t.Error("a number Number refused was taken")
	}
}
