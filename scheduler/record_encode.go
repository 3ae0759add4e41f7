package scheduler

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"sync"
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
	e := recordEncoders.Get().(*recordEncoder)
	e.out = e.record(e.out[:0], d, cycle, assumed)
	// The event keeps its own copy, of the right size; the encoder's
	// buffers go back to the pool.
	data := bytes.Clone(e.out)
	recordEncoders.Put(e)
	s := new(structpb.Struct)
	s.ProtoReflect().SetUnknown(protoreflect.RawFields(data))
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
	e := recordEncoders.Get().(*recordEncoder)
	defer recordEncoders.Put(e)
	return e.record(b, d, cycle, assumed)
}

// recordEncoders are encoders whose buffers have grown to a record's
// parts: a placement's record is built without growing any.
var recordEncoders = sync.Pool{New: func() any { return new(recordEncoder) }}

// recordEncoder holds the scratch buffers a record's parts are built in
// before they are copied, each with its length, into the record: a
// scalar value (val), a struct's fields (fields), a list's items (list),
// one score's fields (item), a list of "node=score" strings (top) and one
// such string (ns).
type recordEncoder struct{ out, val, fields, list, item, top, ns []byte }

// Value kinds of google.protobuf.Value's oneof, by field number.
const (
	valueStruct protowire.Number = 5
	valueList   protowire.Number = 6
)

func (e *recordEncoder) record(b []byte, d *Decision, cycle uint64, assumed []AssumedPod) []byte {
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
	e.list = e.list[:0]
	for _, s := range d.Scores {
		e.item = e.str(e.item[:0], "plugin", s.Plugin)
		e.item = e.num(e.item, "weight", float64(s.Weight))
		e.top = e.nodeScores(e.top[:0], s.Top)
		e.item = e.entryOf(e.item, "top", valueList, e.top)
		e.list = appendListItemOf(e.list, valueStruct, e.item)
	}
	b = e.entryOf(b, "scores", valueList, e.list)
	e.top = e.nodeScores(e.top[:0], d.Totals)
	b = e.entryOf(b, "totals", valueList, e.top)

	e.fields = e.fields[:0]
	for _, p := range sortedKeys(d.Versions) {
		e.fields = e.str(e.fields, p, d.Versions[p])
	}
	b = e.entryOf(b, "versions", valueStruct, e.fields)
	e.fields = e.fields[:0]
	for _, a := range assumed {
		e.fields = e.str(e.fields, a.Pod, a.Node)
	}
	return e.entryOf(b, "assumedOn", valueStruct, e.fields)
}

func (e *recordEncoder) str(b []byte, key, s string) []byte {
	s = validUTF8(s)
	e.val = protowire.AppendString(protowire.AppendTag(e.val[:0], 3, protowire.BytesType), s)
	return e.entry(b, key, e.val)
}

func (e *recordEncoder) num(b []byte, key string, f float64) []byte {
	e.val = protowire.AppendFixed64(protowire.AppendTag(e.val[:0], 2, protowire.Fixed64Type), math.Float64bits(f))
	return e.entry(b, key, e.val)
}

// counts appends key with a Struct of m's counts; it uses e.fields.
func (e *recordEncoder) counts(b []byte, key string, m map[string]int) []byte {
	e.fields = e.fields[:0]
	for _, k := range sortedKeys(m) {
		e.fields = e.num(e.fields, k, float64(m[k]))
	}
	return e.entryOf(b, key, valueStruct, e.fields)
}

// nodeScores appends to list the encoded items of a list of "node=score"
// strings.
func (e *recordEncoder) nodeScores(list []byte, ns []NodeScore) []byte {
	for _, n := range ns {
		e.ns = appendNodeScore(e.ns[:0], n)
		if !utf8.Valid(e.ns) {
			e.ns = append(e.ns[:0], validUTF8(string(e.ns))...)
		}
		e.val = protowire.AppendBytes(protowire.AppendTag(e.val[:0], 3, protowire.BytesType), e.ns)
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

// entryOf appends a Struct's field key with a Value whose field kind
// (valueStruct or valueList) holds payload: entry(b, key, the Value),
// without building the Value apart.
func (e *recordEncoder) entryOf(b []byte, key string, kind protowire.Number, payload []byte) []byte {
	key = validUTF8(key)
	val := protowire.SizeTag(kind) + protowire.SizeBytes(len(payload))
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(val)
	b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.BytesType), uint64(n))
	b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), key)
	b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.BytesType), uint64(val))
	return protowire.AppendBytes(protowire.AppendTag(b, kind, protowire.BytesType), payload)
}

// appendListItemOf appends, as a list's item, a Value whose field kind
// holds payload: appendListItem(b, the Value).
func appendListItemOf(b []byte, kind protowire.Number, payload []byte) []byte {
	val := protowire.SizeTag(kind) + protowire.SizeBytes(len(payload))
	b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.BytesType), uint64(val))
	return protowire.AppendBytes(protowire.AppendTag(b, kind, protowire.BytesType), payload)
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
