package scheduler

import (
	"bytes"
	"math"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The record is encoded in pooled buffers, each Value's length written
// before it rather than the Value built apart: the bytes are those of the
// nested encoding, for decisions of every shape, reason and name
// (invalid UTF-8 included), and with an encoder reused.
func TestRecordEncodingUnchanged(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 300))
	decisions := []*Decision{
		{Pod: "ns/q", Profile: "p"},
		{Pod: "ns/p", Profile: DefaultSchedulerName, Node: "n-2", SnapshotSequence: 1 << 40, StartIndex: 7, NumNodes: 5000, Evaluated: 600, Feasible: 500,
			Rejections: map[string]int{"node(s) were unschedulable": 3, "Insufficient cpu": 97, long: 1}, RejectedBy: map[string]int{"NodeUnschedulable": 3, "NodeResourcesFit": 97},
			Versions: map[string]string{"labelfilter": "sha256:ab", "nodenumber": "sha256:cd", "bad\xff": "v\xfe"},
			Scores: []PluginScores{{Plugin: "A", Weight: 2, Top: []NodeScore{{Name: "n-2", Score: 200}, {Name: "n-\xff1", Score: -4}}}, {Plugin: "B", Weight: 1},
				{Plugin: long, Weight: 3, Top: []NodeScore{{Name: long, Score: 1 << 40}}}},
			Totals: []NodeScore{{Name: "n-2", Score: 201}, {Name: "n-1", Score: 0}, {Name: long, Score: -1}}},
	}
	var assumed []AssumedPod
	for i := range 40 {
		assumed = append(assumed, AssumedPod{Pod: "ns/pod-" + string(rune('a'+i%26)) + long[:i], Node: "node-" + long[:i%7]})
	}
	for round := range 2 {
		for i, d := range decisions {
			for _, as := range [][]AssumedPod{nil, assumed[:2], assumed} {
				got, want := appendRecord([]byte("prefix"), d, uint64(round*9+i), as), nestedRecord([]byte("prefix"), d, uint64(round*9+i), as)
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d, decision %d, %d assumed: encoded\n%q\nnested\n%q", round, i, len(as), got, want)
				}
				if enc := encodedRecord(d, uint64(round*9+i), as); !bytes.Equal(enc.ProtoReflect().GetUnknown(), want[len("prefix"):]) {
					t.Fatalf("round %d, decision %d: encodedRecord differs", round, i)
				}
			}
		}
	}
}

// nestedRecord is appendRecord as it was first written, each nested
// Value built apart and then copied: the reference its bytes are held to.
func nestedRecord(b []byte, d *Decision, cycle uint64, assumed []AssumedPod) []byte {
	var e nestedEncoder
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

// nestedEncoder is recordEncoder as it was first written.
type nestedEncoder struct{ val []byte }

func (e *nestedEncoder) str(b []byte, key, s string) []byte {
	s = validUTF8(s)
	e.val = protowire.AppendString(protowire.AppendTag(e.val[:0], 3, protowire.BytesType), s)
	return e.entry(b, key, e.val)
}

func (e *nestedEncoder) num(b []byte, key string, f float64) []byte {
	e.val = protowire.AppendFixed64(protowire.AppendTag(e.val[:0], 2, protowire.Fixed64Type), math.Float64bits(f))
	return e.entry(b, key, e.val)
}

func (e *nestedEncoder) counts(b []byte, key string, m map[string]int) []byte {
	var st []byte
	for _, k := range sortedKeys(m) {
		st = e.num(st, k, float64(m[k]))
	}
	return e.entry(b, key, appendStructValue(nil, st))
}

// nodeScores is the encoded items of a list of "node=score" strings.
func (e *nestedEncoder) nodeScores(ns []NodeScore) []byte {
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
func (e *nestedEncoder) entry(b []byte, key string, val []byte) []byte {
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
