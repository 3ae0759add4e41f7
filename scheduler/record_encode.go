package scheduler

import (
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// A Bound event's detail is written straight to the protobuf encoding of
// the Struct Record builds (the same bytes on the wire; decision 0105): a
// Struct of some 50 values built per placement, then encoded by
// reflection (which allocates for every key of every map, twice), cost
// more than everything else the log did for the event.

// encodedRecord is Record's Struct as it is encoded: a Struct whose
// fields are held encoded (as unknown fields, which proto.Marshal writes
// as they are), so that its wire bytes are Record's. Read it with
// ParseRecord or after a round trip through the log; its Fields map is
// empty.
func encodedRecord(d *Decision, cycle uint64, assumed []AssumedPod) *structpb.Struct {
	s := new(structpb.Struct)
	s.ProtoReflect().SetUnknown(protoreflect.RawFields(appendRecord(nil, d, cycle, assumed)))
	return s
}

// decodedRecord returns s with any fields it holds encoded (an
// encodedRecord) decoded into Fields.
func decodedRecord(s *structpb.Struct) (*structpb.Struct, error) {
	if len(s.ProtoReflect().GetUnknown()) == 0 {
		return s, nil
	}
	data, err := proto.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := new(structpb.Struct)
	if err := proto.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// appendRecord appends the fields of Record(d, cycle, assumed), encoded as
// a google.protobuf.Struct's, to b.
func appendRecord(b []byte, d *Decision, cycle uint64, assumed []AssumedPod) []byte {
	var e recordEncoder
	b = e.str(b, "pod", d.Pod)
	b = e.str(b, "profile", d.Profile)
	b = e.str(b, "node", d.Node)
	b = e.num(b, "cycle", float64(cycle))
	b = e.num(b, "snapshotSequence", float64(d.SnapshotSequence))
	b = e.num(b, "startIndex", float64(d.StartIndex))
	b = e.num(b, "numNodes", float64(d.NumNodes))
	b = e.num(b, "evaluated", float64(d.Evaluated))
	b = e.num(b, "feasible", float64(d.Feasible))
	b = e.counts(b, "rejections", d.Rejections)
	b = e.counts(b, "rejectedBy", d.RejectedBy)

	// scores: a list of {plugin, weight, top}.
	var list []byte
	for _, s := range d.Scores {
		var st []byte
		st = e.str(st, "plugin", s.Plugin)
		st = e.num(st, "weight", float64(s.Weight))
		st = e.entry(st, "top", appendListValue(nil, e.nodeScores(s.Top)))
		list = appendListItem(list, appendStructValue(nil, st))
	}
	b = e.entry(b, "scores", appendListValue(nil, list))
	b = e.entry(b, "totals", appendListValue(nil, e.nodeScores(d.Totals)))

	var vers []byte
	for _, p := range sortedKeys(d.Versions) {
		vers = e.str(vers, p, d.Versions[p])
	}
	b = e.entry(b, "versions", appendStructValue(nil, vers))
	var as []byte
	for _, a := range assumed {
		as = e.str(as, a.Pod, a.Node)
	}
	return e.entry(b, "assumedOn", appendStructValue(nil, as))
}

// recordEncoder holds the scratch buffer a scalar value is built in.
type recordEncoder struct{ val []byte }

func (e *recordEncoder) str(b []byte, key, s string) []byte {
	s = validUTF8(s)
	e.val = protowire.AppendString(protowire.AppendTag(e.val[:0], 3, protowire.BytesType), s)
	return e.entry(b, key, e.val)
}

func (e *recordEncoder) num(b []byte, key string, f float64) []byte {
	e.val = protowire.AppendFixed64(protowire.AppendTag(e.val[:0], 2, protowire.Fixed64Type), math.Float64bits(f))
	return e.entry(b, key, e.val)
}

func (e *recordEncoder) counts(b []byte, key string, m map[string]int) []byte {
	var st []byte
	for _, k := range sortedKeys(m) {
		st = e.num(st, k, float64(m[k]))
	}
	return e.entry(b, key, appendStructValue(nil, st))
}

// nodeScores is the encoded items of a list of "node=score" strings.
func (e *recordEncoder) nodeScores(ns []NodeScore) []byte {
	var list, s []byte
	for _, n := range ns {
		s = appendNodeScore(s[:0], n)
		if !utf8.Valid(s) {
			s = append(s[:0], validUTF8(string(s))...)
		}
		e.val = protowire.AppendBytes(protowire.AppendTag(e.val[:0], 3, protowire.BytesType), s)
		list = appendListItem(list, e.val)
	}
	return list
}

// entry appends a Struct's field key with the encoded Value val.
func (e *recordEncoder) entry(b []byte, key string, val []byte) []byte {
	key = validUTF8(key)
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(len(val))
	b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.BytesType), uint64(n))
	b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), key)
	return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), val)
}

// appendStructValue appends a Value holding the Struct whose encoded
// fields are st.
func appendStructValue(b, st []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, 5, protowire.BytesType), st)
}

// appendListValue appends a Value holding the list whose encoded items
// are list.
func appendListValue(b, list []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, 6, protowire.BytesType), list)
}

// appendListItem appends the encoded Value val as a list's item.
func appendListItem(b, val []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), val)
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validUTF8 is s with each invalid byte sequence replaced by U+FFFD: a
// string field protobuf cannot read back would make the whole Bound
// event undecodable (proto.Marshal refuses such strings in a Struct it
// builds, but the encoded record is written as it is).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
