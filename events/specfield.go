package events

import "google.golang.org/protobuf/encoding/protowire"

// SpecString reads the top-level string key of an encoded spec (a
// google.protobuf.Struct) as
//
//	proto.Unmarshal(spec, s); s.GetFields()[key].GetStringValue()
//
// would, without decoding it: "" when the key is missing or not a string.
// ok is false when spec is not a Struct proto.Unmarshal accepts (whose
// decoding, an empty spec, the caller does itself). As proto.Unmarshal
// does, a later entry of the same key replaces an earlier one, a value's
// later kind replaces an earlier one, and fields it does not know are
// skipped.
func SpecString(spec []byte, key string) (string, bool) {
	if !ValidStruct(spec) {
		return "", false
	}
	var out string
	for b := spec; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		entry, n := protowire.ConsumeBytes(b)
		b = b[n:]
		if s, ok := entryString(entry, key); ok {
			out = s
		}
	}
	return out, true
}

// entryString reads one map entry (key = 1, Value = 2) of a valid Struct:
// ok when its key is key, s the Value's string ("" for another kind).
func entryString(entry []byte, key string) (s string, ok bool) {
	var k string
	kind := protowire.Number(0) // the Value's last kind field
	validFields(entry, 0, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		switch {
		case num == 1 && typ == protowire.BytesType:
			k = string(v)
		case num == 2 && typ == protowire.BytesType:
			// Repeated, the value messages merge: the last kind wins.
			if vk, vs, set := valueKind(v); set {
				kind, s = vk, vs
			}
		}
		return true
	})
	if k != key {
		return "", false
	}
	if kind != 3 {
		s = ""
	}
	return s, true
}

// valueKind is the last kind field set in a valid Value's encoding, and
// its string when that is string_value (3).
func valueKind(v []byte) (kind protowire.Number, s string, set bool) {
	validFields(v, 0, func(num protowire.Number, typ protowire.Type, f []byte) bool {
		want := protowire.BytesType
		switch num {
		case 1, 4: // null_value, bool_value
			want = protowire.VarintType
		case 2: // number_value
			want = protowire.Fixed64Type
		case 3, 5, 6: // string, struct, list
		default:
			return true
		}
		if typ != want {
			return true
		}
		kind, set = num, true
		if num == 3 {
			s = string(f)
		}
		return true
	})
	return kind, s, set
}
