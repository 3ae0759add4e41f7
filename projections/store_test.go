package projections

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetplane/jetplane/schemas"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func applied(seq uint64, name string, labels map[string]string, deps ...string) *schemas.EventRecord {
	meta := &schemas.ObjectMeta{Labels: labels, Group: "g1"}
	for _, d := range deps {
		meta.DependsOn = append(meta.DependsOn, &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "ns", Name: d})
	}
	return &schemas.EventRecord{Sequence: seq, Type: schemas.EventType_EVENT_TYPE_APPLIED,
		Key:    &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "ns", Name: name},
		Object: &schemas.ObjectRecord{ApiVersion: "v1", Kind: "ConfigMap", Metadata: meta}}
}

func typed(seq uint64, name string, t schemas.EventType) *schemas.EventRecord {
	return &schemas.EventRecord{Sequence: seq, Type: t, Key: &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "ns", Name: name},
		Object: &schemas.ObjectRecord{Status: &schemas.Status{Phase: "Ready"}}}
}

func TestFold(t *testing.T) {
	s := NewStore(StoreOptions{})
	s.Apply(applied(1, "a", map[string]string{"app": "web"}))
	a := s.Get(Key{"ConfigMap", "ns", "a"})
	if a.Status.Goal != GoalExists || a.Metadata.ResourceVersion != 1 {
		t.Fatalf("after apply: %v", a)
	}
	s.Apply(typed(2, "a", schemas.EventType_EVENT_TYPE_STATUS_CHANGED))
	a2 := s.Get(Key{"ConfigMap", "ns", "a"})
	if a2.Status.Phase != "Ready" || a2.Status.Goal != GoalExists || a2.Metadata.ResourceVersion != 2 {
		t.Fatalf("after status: %v", a2)
	}
	if a.Metadata.ResourceVersion != 1 || a.Status.Phase != "" {
		t.Fatal("fold modified an object readers already held")
	}
	s.Apply(typed(3, "a", schemas.EventType_EVENT_TYPE_DELETE_REQUESTED))
	if got := s.Get(Key{"ConfigMap", "ns", "a"}).Status; got.Goal != GoalDeleted || got.Phase != "Ready" {
		t.Fatalf("after delete request: %v", got)
	}
	s.Apply(typed(4, "a", schemas.EventType_EVENT_TYPE_FINALIZED))
	if s.Get(Key{"ConfigMap", "ns", "a"}) != nil || s.Len() != 0 {
		t.Fatal("finalized key still present")
	}
	// A status for an absent key and a replayed old event change nothing.
	s.Apply(typed(5, "zzz", schemas.EventType_EVENT_TYPE_STATUS_CHANGED))
	s.Apply(applied(2, "old", nil))
	if s.Len() != 0 || s.Seq() != 5 {
		t.Fatalf("len %d seq %d, want 0 and 5", s.Len(), s.Seq())
	}
}

func TestListAndDependents(t *testing.T) {
	s := NewStore(StoreOptions{})
	s.Apply(applied(1, "db", map[string]string{"app": "db", "tier": "back"}))
	s.Apply(applied(2, "web", map[string]string{"app": "web", "tier": "front"}, "db"))
	s.Apply(applied(3, "api", map[string]string{"app": "api", "tier": "back"}, "db"))
	tests := []struct {
		sel  string
		want string
	}{
		{"", "[api db web]"},
		{"tier=back", "[api db]"},
		{"tier!=back", "[web]"},
		{"app in (web, api)", "[api web]"},
		{"app notin (web,api),tier", "[db]"},
		{"!tier", "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			sel, err := ParseSelector(tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			objs, seq := s.List(Query{Kind: "ConfigMap", Labels: sel})
			var names []string
			for _, o := range objs {
				names = append(names, o.Metadata.Name)
			}
			if got := fmt.Sprint(names); got != tt.want && !(tt.want == "[]" && len(names) == 0) || seq != 3 {
				t.Fatalf("list %q = %v at %d, want %s at 3", tt.sel, names, seq, tt.want)
			}
		})
	}
	if got := fmt.Sprint(s.Dependents(Key{"ConfigMap", "ns", "db"})); got != "[ConfigMap/ns/api ConfigMap/ns/web]" {
		t.Fatalf("dependents of db = %s", got)
	}
	s.Apply(applied(4, "web", nil))
	if got := len(s.Dependents(Key{"ConfigMap", "ns", "db"})); got != 1 {
		t.Fatalf("after web drops its dependency, db has %d dependents, want 1", got)
	}
	for _, bad := range []string{"a in b", "=x", "a=(b)", "x notin ()"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) succeeded, want an error", bad)
		}
	}
}

func TestWatchResumeAndGone(t *testing.T) {
	s := NewStore(StoreOptions{WatchWindow: 3})
	for i := uint64(1); i <= 5; i++ {
		s.Apply(applied(i, fmt.Sprint("o", i), nil))
	}
	if _, _, err := s.Watch(Query{}, 1); !errors.Is(err, ErrGone) {
		t.Fatalf("watch from 1 with a window of 3: err = %v, want ErrGone", err)
	}
	ch, stop, err := s.Watch(Query{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s.Apply(typed(6, "o1", schemas.EventType_EVENT_TYPE_FINALIZED))
	var got []string
	for range 3 {
		c := <-ch
		got = append(got, fmt.Sprintf("%s %s %d", c.Type, c.Key.Name, c.Sequence))
	}
	if fmt.Sprint(got) != "[ADDED o4 4 ADDED o5 5 DELETED o1 6]" {
		t.Fatalf("watch from 3 = %v", got)
	}
	// From 0: the current state first.
	ch0, stop0, err := s.Watch(Query{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop0()
	if c := <-ch0; c.Type != Added || c.Key.Name != "o2" {
		t.Fatalf("watch from 0 starts with %s %s, want ADDED o2", c.Type, c.Key.Name)
	}
}

// A Bound event replaces the pod's spec (nodeName set) and keeps its
// generation and status: binding is not a user's change of desired state.
func TestFoldBound(t *testing.T) {
	pod := func(node string) []byte {
		spec, err := structpb.NewStruct(map[string]any{"nodeName": node})
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := &schemas.ObjectKey{Kind: "Pod", Namespace: "ns", Name: "p"}
	s := NewStore(StoreOptions{})
	s.Apply(&schemas.EventRecord{Sequence: 1, Type: schemas.EventType_EVENT_TYPE_BOUND, Key: key,
		Object: &schemas.ObjectRecord{Spec: pod("n1")}})
	if s.Len() != 0 {
		t.Fatal("a binding of an absent pod created it")
	}
	s.Apply(&schemas.EventRecord{Sequence: 2, Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: key,
		Object: &schemas.ObjectRecord{Kind: "Pod", Metadata: &schemas.ObjectMeta{Generation: 1}, Spec: pod("")}})
	s.Apply(&schemas.EventRecord{Sequence: 3, Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: key,
		Object: &schemas.ObjectRecord{Status: &schemas.Status{Phase: "Pending"}}})
	s.Apply(&schemas.EventRecord{Sequence: 4, Type: schemas.EventType_EVENT_TYPE_BOUND, Key: key,
		Object: &schemas.ObjectRecord{Spec: pod("n1")}})
	got := s.Get(Key{"Pod", "ns", "p"})
	if n := got.GetSpec().GetFields()["nodeName"].GetStringValue(); n != "n1" {
		t.Fatalf("nodeName %q after Bound, want n1", n)
	}
	if got.Metadata.Generation != 1 || got.Status.GetPhase() != "Pending" || got.Metadata.ResourceVersion != 4 {
		t.Fatalf("Bound changed more than the spec: %v", got)
	}
}

func TestKindsOutliveTheirObjects(t *testing.T) {
	s := NewStore(StoreOptions{})
	k := &schemas.ObjectKey{Kind: "Widget.example.com", Namespace: "a", Name: "w"}
	s.Apply(&schemas.EventRecord{Sequence: 1, Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k,
		Object: &schemas.ObjectRecord{Metadata: &schemas.ObjectMeta{Name: "w", Namespace: "a"}}})
	s.Apply(&schemas.EventRecord{Sequence: 2, Type: schemas.EventType_EVENT_TYPE_FINALIZED, Key: k})
	if s.Len() != 0 {
		t.Fatalf("the object is still there after Finalized")
	}
	if got := s.Kinds(); len(got) != 1 || got[0] != "Widget.example.com" {
		t.Fatalf("Kinds() = %v, want [Widget.example.com]", got)
	}
}

// Waiters for different sequences each return once the store has applied
// theirs, and not before; a waiter is woken only when the lowest sequence
// waited for is reached, not at every event.
func TestWaitForWakesAtItsSequence(t *testing.T) {
	s := NewStore(StoreOptions{})
	targets := []uint64{5, 3, 9, 3, 12}
	type woke struct{ target, seq uint64 }
	done := make(chan woke, len(targets))
	for _, target := range targets {
		go func() {
			if err := s.WaitFor(context.Background(), target); err != nil {
				t.Error(err)
			}
			done <- woke{target, s.Seq()}
		}()
	}
	// Every waiter has registered once waitMin is the lowest target.
	deadline := time.Now().Add(10 * time.Second)
	for s.waitMin.Load() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("waitMin = %d, want 3", s.waitMin.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for seq := uint64(1); seq <= 12; seq++ {
		s.Apply(applied(seq, fmt.Sprint("o", seq), nil))
	}
	for range targets {
		select {
		case w := <-done:
			if w.seq < w.target {
				t.Fatalf("a waiter for %d returned at %d", w.target, w.seq)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not woken")
		}
	}
	if got := s.waitMin.Load(); got != 0 {
		t.Fatalf("waitMin = %d after every waiter returned, want 0", got)
	}
	// Nobody waits: applying makes no new channel.
	ch := s.notify
	s.Apply(applied(13, "o13", nil))
	if s.notify != ch {
		t.Fatal("an apply nobody waited for replaced the notify channel")
	}
}

// KeysWhere is Keys of the keys its predicate keeps, in the same order,
// at the same sequence.
func TestKeysWhereIsKeysFiltered(t *testing.T) {
	s := NewStore(StoreOptions{})
	for i := range 50 {
		s.Apply(applied(uint64(i+1), fmt.Sprintf("k-%02d", (i*7)%50), map[string]string{"app": "web"}))
	}
	sel, err := ParseSelector("app=web")
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Kind: "ConfigMap", Labels: sel}
	keep := func(k Key) bool { return k.Name[len(k.Name)-1]%3 == 0 }
	all, seq := s.Keys(q)
	var want []Key
	for _, k := range all {
		if keep(k) {
			want = append(want, k)
		}
	}
	got, gotSeq := s.KeysWhere(q, keep)
	if fmt.Sprint(got) != fmt.Sprint(want) || gotSeq != seq || len(got) == 0 {
		t.Fatalf("KeysWhere: %v at %d; want %v at %d", got, gotSeq, want, seq)
	}
}

// A watch of records sees the same changes as Watch, each with the
// store's record (spec encoded) in place of a decoded object: from 0
// (the list), from a sequence (the window) and live.
func TestWatchRecords(t *testing.T) {
	spec, err := structpb.NewStruct(map[string]any{"nodeName": "n1"})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := proto.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(StoreOptions{})
	for i := uint64(1); i <= 3; i++ {
		ev := applied(i, fmt.Sprint("o", i), map[string]string{"app": "web"})
		ev.Object.Spec = enc
		s.Apply(ev)
	}
	describe := func(c Change) string {
		return fmt.Sprintf("%s %s %d", c.Type, c.Key.Name, c.Sequence)
	}
	take := func(t *testing.T, objs, recs <-chan Change, n int) {
		t.Helper()
		for range n {
			var o, r Change
			select {
			case o = <-objs:
			case <-time.After(10 * time.Second):
				t.Fatal("no change from Watch")
			}
			select {
			case r = <-recs:
			case <-time.After(10 * time.Second):
				t.Fatal("no change from WatchRecords")
			}
			if describe(o) != describe(r) || r.Object != nil || o.Record != nil {
				t.Fatalf("Watch sent %s (record %v), WatchRecords %s (object %v)", describe(o), o.Record != nil, describe(r), r.Object != nil)
			}
			if r.Record == nil || !proto.Equal(ObjectOf(r.Record), o.Object) {
				t.Fatalf("%s: record decodes to %v, Watch sent %v", describe(r), ObjectOf(r.Record), o.Object)
			}
		}
	}
	for _, from := range []uint64{0, 1} {
		objs, stopO, err := s.Watch(Query{Kind: "ConfigMap"}, from)
		if err != nil {
			t.Fatal(err)
		}
		recs, stopR, err := s.WatchRecords(Query{Kind: "ConfigMap"}, from)
		if err != nil {
			t.Fatal(err)
		}
		want := 3
		if from == 1 {
			want = 2
		}
		take(t, objs, recs, want)
		stopO()
		stopR()
	}
	objs, stopO, err := s.Watch(Query{Kind: "ConfigMap"}, s.Seq())
	if err != nil {
		t.Fatal(err)
	}
	defer stopO()
	recs, stopR, err := s.WatchRecords(Query{Kind: "ConfigMap"}, s.Seq())
	if err != nil {
		t.Fatal(err)
	}
	defer stopR()
	s.Apply(typed(4, "o1", schemas.EventType_EVENT_TYPE_STATUS_CHANGED))
	s.Apply(typed(5, "o2", schemas.EventType_EVENT_TYPE_FINALIZED))
	take(t, objs, recs, 2)
}
