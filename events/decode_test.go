package events

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/schemas"
)

// fullEvent is an event with every field of EventRecord set, in shapes the
// log holds: labels, annotations, dependencies, finalizers, a status with
// conditions and a kind's own details, a scheduling decision.
func fullEvent(r *rand.Rand, i int) *schemas.Event {
	spec, _ := structpb.NewStruct(map[string]any{"replicas": float64(r.IntN(5)), "image": "app:1", "env": map[string]any{"A": "b"}})
	details, _ := structpb.NewStruct(map[string]any{"podIP": "10.0.0.1", "restarts": float64(r.IntN(3))})
	detail, _ := structpb.NewStruct(map[string]any{"node": "n1", "feasible": []any{"n1", "n2"}, "cycle": float64(i),
		"scores": []any{map[string]any{"plugin": "p", "top": []any{"n1=3", "n2=1"}, "none": nil, "ok": true}}})
	ev := &schemas.Event{
		Id:    fmt.Sprint("ev-", i),
		Type:  schemas.EventType(r.IntN(7)),
		Key:   &schemas.ObjectKey{Kind: "Deployment.apps", Namespace: "ns-é", Name: fmt.Sprint("d-", i)},
		Actor: "user/bench",
		Time:  timestamppb.New(time.Unix(int64(1e9+i), int64(r.IntN(1e9)))),
		Cause: fmt.Sprint("cause-", i),
		Object: &schemas.Object{ApiVersion: "apps/v1", Kind: "Deployment", Spec: spec, Metadata: &schemas.ObjectMeta{
			Name: "n", Namespace: "ns", Uid: "u-1", Group: "g",
			Labels:      map[string]string{"app": fmt.Sprint("a", r.IntN(3)), "tier": "web", "": "empty key"},
			Annotations: map[string]string{"jetplane.io/uid": "k-1", "note": ""},
			DependsOn:   []*schemas.ObjectKey{{Kind: "ConfigMap", Name: "c"}, {Kind: "Secret", Namespace: "ns", Name: "s"}},
			Finalizers:  []string{"jetplane.io/cleanup", "x"},
			Generation:  int64(r.IntN(10)) - 2, ResourceVersion: uint64(r.Int64()),
			CreationTime: timestamppb.New(time.Unix(-5, 3)), DeletionTime: timestamppb.New(time.Unix(7, 0)),
		}, Status: &schemas.Status{
			Goal: "exists", Phase: "Ready", ObservedGeneration: int64(r.IntN(10)), Message: "ok",
			Conditions:  []*schemas.Condition{{Type: "Ready", Status: "True", Reason: "Done", Message: "m", LastTransitionTime: timestamppb.Now()}, {Type: "Other"}},
			NextRunTime: timestamppb.Now(), Details: details,
		}},
		Detail: detail,
	}
	// Leave fields out at random: absence must decode as absence.
	if r.IntN(3) == 0 {
		ev.Object.Status = nil
	}
	if r.IntN(3) == 0 {
		ev.Object.Metadata = nil
	}
	if r.IntN(4) == 0 {
		ev.Object = nil
	}
	if r.IntN(2) == 0 {
		ev.Detail = nil
	}
	return ev
}

// checkFast decodes data both ways: whenever the fast path accepts data,
// proto.Unmarshal must accept it too and give an equal record, but for the
// detail, which a record leaves out. It reports whether the fast path
// accepted.
func checkFast(t testing.TB, data []byte) bool {
	t.Helper()
	slow := new(schemas.EventRecord)
	slowErr := proto.Unmarshal(data, slow)
	slow.Detail = nil
	fast, ok := fastRecord(append([]byte(nil), data...))
	if !ok {
		return false
	}
	if slowErr != nil {
		t.Fatalf("fast path accepted %x, proto.Unmarshal refused it: %v", data, slowErr)
	}
	if fast.Detail != nil {
		t.Fatalf("fast path decoded the detail of %x", data)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("fast path decoded %x as\n%v\nproto.Unmarshal as\n%v", data, fast, slow)
	}
	return true
}

func TestFastRecordMatchesUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	accepted, corrupted := 0, 0
	for i := range 2000 {
		data, err := proto.Marshal(fullEvent(r, i))
		if err != nil {
			t.Fatal(err)
		}
		// Every event jetplane writes takes the fast path.
		if !checkFast(t, data) {
			t.Fatalf("fast path refused a well-formed event %x", data)
		}
		accepted++
		// Corrupted copies: a flipped byte, a truncation, an unknown field,
		// a field repeated (merged, as proto does). The fast path either
		// refuses them or decodes them exactly as proto.Unmarshal does.
		bad := append([]byte(nil), data...)
		bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
		if checkFast(t, bad) {
			corrupted++
		}
		checkFast(t, data[:r.IntN(len(data))])
		checkFast(t, append(append([]byte(nil), data...), data...))
		unknown := protowire.AppendTag(append([]byte(nil), data...), 99, protowire.VarintType)
		unknown = protowire.AppendVarint(unknown, 7)
		if checkFast(t, unknown) {
			t.Fatal("fast path accepted an unknown field: it would drop it")
		}
	}
	invalid := protowire.AppendTag(nil, 5, protowire.BytesType)
	invalid = protowire.AppendBytes(invalid, []byte{0xff, 0xfe})
	if checkFast(t, invalid) {
		t.Fatal("fast path accepted a string that is not UTF-8")
	}
	t.Logf("%d well-formed events, %d corrupted copies decoded alike", accepted, corrupted)
}

// FuzzFastRecord checks the fast path against proto.Unmarshal on any
// payload (go test -fuzz FuzzFastRecord ./events/).
func FuzzFastRecord(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		data, _ := proto.Marshal(fullEvent(r, i))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFast(t, data) })
}

// TestDecodeRecordFallsBack shows an event the fast path refuses still
// decodes: unknown fields are kept, so a snapshot written from it keeps
// them too.
func TestDecodeRecordFallsBack(t *testing.T) {
	data, _ := proto.Marshal(&schemas.Event{Id: "e", Key: &schemas.ObjectKey{Kind: "K", Name: "n"}})
	data = protowire.AppendTag(data, 99, protowire.BytesType)
	data = protowire.AppendBytes(data, []byte("future"))
	rec, err := DecodeRecord(data, 5)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Sequence != 5 || rec.Key.GetName() != "n" || len(rec.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("got %v, unknown %x", rec, rec.ProtoReflect().GetUnknown())
	}
	if _, err := DecodeRecord([]byte{0xff}, 6); err == nil {
		t.Fatal("a malformed payload decoded")
	}
}

// TestRecordLeavesDetailOut shows a record without its detail (a Bound
// event's decision), and a detail proto.Unmarshal refuses refused by the
// fast path too: a string that is not UTF-8, or a nested value cut short,
// deep inside the decision.
func TestRecordLeavesDetailOut(t *testing.T) {
	detail, _ := structpb.NewStruct(map[string]any{"node": "n1", "scores": []any{map[string]any{"top": []any{"n1=3"}}}})
	ev := &schemas.Event{Id: "e", Type: schemas.EventType_EVENT_TYPE_BOUND, Key: &schemas.ObjectKey{Kind: "Pod", Namespace: "ns", Name: "p"}, Detail: detail}
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := DecodeRecord(data, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Detail != nil || rec.Key.GetName() != "p" || rec.Type != schemas.EventType_EVENT_TYPE_BOUND {
		t.Fatalf("record %v", rec)
	}
	full, err := Decode(data, 3)
	if err != nil || !proto.Equal(full.Detail, detail) {
		t.Fatalf("Decode lost the detail: %v, %v", full.GetDetail(), err)
	}
	// A Struct whose one field's value holds a struct_value that ends
	// inside a field: every enclosing length is right.
	inner := protowire.AppendTag(nil, 1, protowire.BytesType)
	inner = protowire.AppendVarint(inner, 5)
	inner = append(inner, 'a')
	value := protowire.AppendTag(nil, 5, protowire.BytesType)
	value = protowire.AppendBytes(value, inner)
	entry := protowire.AppendTag(nil, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "k")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendBytes(entry, value)
	cut := protowire.AppendTag(nil, 1, protowire.BytesType)
	cut = protowire.AppendBytes(cut, entry)
	noDetail, _ := proto.Marshal(&schemas.Event{Id: "e", Key: &schemas.ObjectKey{Kind: "Pod", Name: "p"}})
	cutShort := protowire.AppendTag(append([]byte(nil), noDetail...), 9, protowire.BytesType)
	cutShort = protowire.AppendBytes(cutShort, cut)
	// A Struct holding a field numbered past 2^29-1, which the wire
	// format's tag can carry but proto.Unmarshal refuses.
	farField := protowire.AppendTag(nil, protowire.MaxValidNumber+1, protowire.VarintType)
	farField = protowire.AppendVarint(farField, 1)
	far := protowire.AppendTag(append([]byte(nil), noDetail...), 9, protowire.BytesType)
	far = protowire.AppendBytes(far, farField)
	for name, bad := range map[string][]byte{
		"invalid UTF-8":         bytes.Replace(data, []byte("n1=3"), []byte{'n', 0xff, '=', '3'}, 1),
		"cut short":             cutShort,
		"field number too high": far,
	} {
		if err := proto.Unmarshal(bad, new(schemas.Event)); err == nil {
			t.Fatalf("%s: proto.Unmarshal accepts it", name)
		}
		if _, ok := fastRecord(append([]byte(nil), bad...)); ok {
			t.Errorf("%s: fast path accepted a detail proto.Unmarshal refuses", name)
		}
		if _, err := DecodeRecord(bad, 4); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
