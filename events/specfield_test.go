package events

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// specStringSlow is what SpecString must equal: the spec decoded.
func specStringSlow(spec []byte, key string) (string, bool) {
	s := new(structpb.Struct)
	if err := proto.Unmarshal(spec, s); err != nil {
		return "", false
	}
	return s.GetFields()[key].GetStringValue(), true
}

// entry encodes one Struct map entry from its raw key and value bytes.
func entry(key string, value []byte) []byte {
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendBytes(e, value)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

func strValue(s string) []byte {
	v := protowire.AppendTag(nil, 3, protowire.BytesType)
	return protowire.AppendString(v, s)
}

func specSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	marshal := func(m map[string]any) []byte {
		s, err := structpb.NewStruct(m)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := proto.Marshal(s)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	boolThenString := append(protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.VarintType), 1), strValue("n2")...)
	stringThenNull := append(strValue("n2"), protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0)...)
	wrongWire := append(strValue("n2"), protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 7)...)
	return [][]byte{
		nil,
		marshal(map[string]any{"nodeName": "node-00001", "containers": []any{map[string]any{"name": "pause"}}}),
		marshal(map[string]any{"nodeName": 3.0}),
		marshal(map[string]any{"nodeName": map[string]any{"x": "y"}}),
		marshal(map[string]any{"other": "x"}),
		marshal(map[string]any{"template": map[string]any{"nodeName": "n1"}, "containers": []any{map[string]any{"nodeName": "inner"}}}), // nested only
		append(entry("nodeName", strValue("n1")), entry("nodeName", strValue("n2"))...),                                                 // the later entry wins
		append(entry("nodeName", strValue("n1")), entry("nodeName", nil)...),                                                            // … even with no kind
		entry("nodeName", boolThenString),
		entry("nodeName", stringThenNull),
		entry("nodeName", wrongWire), // a kind with the wrong wire type is an unknown field
		entry("nodeName", strValue("\xff")),
		entry("node\xffName", strValue("n1")),
		append(entry("nodeName", strValue("n1")), entry("x", strValue("\xff"))...),
		append(entry("nodeName", strValue("n1")), 0x0a),
		protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1),
	}
}

func TestSpecString(t *testing.T) {
	for i, spec := range specSeeds(t) {
		got, ok := SpecString(spec, "nodeName")
		want, wantOK := specStringSlow(spec, "nodeName")
		if got != want || ok != wantOK {
			t.Errorf("seed %d (%x): SpecString = %q, %v; decoded: %q, %v", i, spec, got, ok, want, wantOK)
		}
	}
}

// FuzzSpecString: reading a key from the encoded spec agrees with
// decoding it, for any bytes.
func FuzzSpecString(f *testing.F) {
	for _, s := range specSeeds(f) {
		f.Add(s, "nodeName")
	}
	f.Fuzz(func(t *testing.T, spec []byte, key string) {
		got, ok := SpecString(spec, key)
		want, wantOK := specStringSlow(spec, key)
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("SpecString(%x, %q) = %q, %v; decoded: %q, %v", spec, key, got, ok, want, wantOK)
		}
	})
}
