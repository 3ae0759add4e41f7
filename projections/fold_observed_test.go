package projections

import (
	"testing"

	"github.com/jetplane/jetplane/schemas"
)

// observedRecord is an object as bridge/kube observes it: uid and
// resourceVersion in annotations (decision 0009).
func observedRecord(uid, rv string) *schemas.ObjectRecord {
	ann := map[string]string{"jetplane.io/cluster": "prod"}
	if uid != "" {
		ann[AnnotationUID] = uid
	}
	if rv != "" {
		ann[AnnotationResourceVersion] = rv
	}
	return &schemas.ObjectRecord{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &schemas.ObjectMeta{Uid: uid, Annotations: ann}}
}

func observedEvent(seq uint64, t schemas.EventType, obj *schemas.ObjectRecord) *schemas.EventRecord {
	return &schemas.EventRecord{Sequence: seq, Type: t, Key: &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "prod/shop", Name: "web"}, Object: obj}
}

// TestFoldObserved checks the stale-observation rules: an Observed event
// of the same uid moves an object forward only, a Finalized event of
// another uid does not remove a recreated object, and anything the rules
// cannot compare is folded as before.
func TestFoldObserved(t *testing.T) {
	const (
		observed  = schemas.EventType_EVENT_TYPE_OBSERVED
		finalized = schemas.EventType_EVENT_TYPE_FINALIZED
	)
	cur := observedRecord("u1", "100")
	cur.Metadata.ResourceVersion = 7
	cur.Status = &schemas.Status{Goal: GoalExists, Phase: "Seen"}
	tests := []struct {
		name string
		cur  *schemas.ObjectRecord
		ev   *schemas.EventRecord
		// wantRV is the jetplane.io/resource-version of the result, "" for
		// an absent key; wantSame means the fold returned cur itself.
		wantRV   string
		wantSame bool
	}{
		{name: "first observation", cur: nil, ev: observedEvent(8, observed, observedRecord("u1", "100")), wantRV: "100"},
		{name: "newer version", cur: cur, ev: observedEvent(8, observed, observedRecord("u1", "101")), wantRV: "101"},
		{name: "same version replayed", cur: cur, ev: observedEvent(8, observed, observedRecord("u1", "100")), wantRV: "100", wantSame: true},
		{name: "older version", cur: cur, ev: observedEvent(8, observed, observedRecord("u1", "99")), wantRV: "100", wantSame: true},
		{name: "numeric not lexical", cur: cur, ev: observedEvent(8, observed, observedRecord("u1", "1000")), wantRV: "1000"},
		{name: "recreated object, lower version", cur: cur, ev: observedEvent(8, observed, observedRecord("u2", "50")), wantRV: "50"},
		{name: "unparsable version", cur: cur, ev: observedEvent(8, observed, observedRecord("u1", "abc")), wantRV: "abc"},
		{name: "no uid", cur: cur, ev: observedEvent(8, observed, observedRecord("", "50")), wantRV: "50"},
		{name: "delete of this object", cur: cur, ev: observedEvent(8, finalized, observedRecord("u1", "102")), wantRV: ""},
		{name: "delete of an older object", cur: cur, ev: observedEvent(8, finalized, observedRecord("u0", "90")), wantRV: "100", wantSame: true},
		{name: "delete without uid", cur: cur, ev: observedEvent(8, finalized, nil), wantRV: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fold(tt.cur, tt.ev)
			if tt.wantSame != (got == tt.cur && got != nil) {
				t.Fatalf("Fold returned cur: %v, want %v", got == tt.cur, tt.wantSame)
			}
			if rv := got.GetMetadata().GetAnnotations()[AnnotationResourceVersion]; rv != tt.wantRV || (got == nil) != (tt.wantRV == "") {
				t.Fatalf("resource-version = %q (present %v), want %q", rv, got != nil, tt.wantRV)
			}
			if got != nil && !tt.wantSame && got.Metadata.ResourceVersion != tt.ev.Sequence {
				t.Fatalf("resourceVersion = %d, want the event's sequence %d", got.Metadata.ResourceVersion, tt.ev.Sequence)
			}
		})
	}

	t.Run("recreated object keeps nothing of the old one", func(t *testing.T) {
		got := Fold(cur, observedEvent(8, observed, observedRecord("u2", "200")))
		if got.Metadata.Uid != "u2" || got.Status.GetPhase() != "" {
			t.Fatalf("uid %q, phase %q; want u2 and no phase", got.Metadata.Uid, got.Status.GetPhase())
		}
	})

	// Through a Store: an ignored event advances the sequence but changes
	// no object and reaches no watcher.
	t.Run("store", func(t *testing.T) {
		s := NewStore(StoreOptions{})
		s.Apply(observedEvent(1, observed, observedRecord("u1", "100")))
		ch, stop, err := s.Watch(Query{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		s.Apply(observedEvent(2, observed, observedRecord("u1", "100")))
		k := Key{"ConfigMap", "prod/shop", "web"}
		if got := s.GetRecord(k); got.Metadata.ResourceVersion != 1 || s.Seq() != 2 {
			t.Fatalf("after a stale event: object at %d, store at %d; want 1 and 2", got.Metadata.ResourceVersion, s.Seq())
		}
		select {
		case c := <-ch:
			t.Fatalf("a stale event reached a watcher: %+v", c)
		default:
		}
		if keys, _ := s.Keys(Query{Kind: "ConfigMap", NamespacePrefix: "prod/"}); len(keys) != 1 {
			t.Fatalf("NamespacePrefix prod/: %v", keys)
		}
		if keys, _ := s.Keys(Query{NamespacePrefix: "pro/"}); len(keys) != 0 {
			t.Fatalf("NamespacePrefix pro/: %v", keys)
		}
	})
}
