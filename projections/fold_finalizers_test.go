package projections

import (
	"slices"
	"testing"

	"github.com/jetplane/jetplane/schemas"
)

// A deletion's propagation policy arrives as a finalizer on its
// DeleteRequested event; the fold adds it to the object's finalizers once,
// and never changes the record it was given.
func TestFoldAddsADeletionsFinalizer(t *testing.T) {
	cur := Fold(nil, applied(1, "a", nil))
	cur.Metadata.Finalizers = []string{"example.com/cleanup"}
	del := func(seq uint64) *schemas.EventRecord {
		ev := typed(seq, "a", schemas.EventType_EVENT_TYPE_DELETE_REQUESTED)
		ev.Object = &schemas.ObjectRecord{Metadata: &schemas.ObjectMeta{Finalizers: []string{"foregroundDeletion"}}}
		return ev
	}
	next := Fold(cur, del(2))
	want := []string{"example.com/cleanup", "foregroundDeletion"}
	if got := next.GetMetadata().GetFinalizers(); !slices.Equal(got, want) {
		t.Fatalf("finalizers %v, want %v", got, want)
	}
	if next.GetStatus().GetGoal() != GoalDeleted {
		t.Fatalf("status %v", next.GetStatus())
	}
	if got := cur.GetMetadata().GetFinalizers(); len(got) != 1 {
		t.Fatalf("the fold changed the record it was given: %v", got)
	}
	if got := Fold(next, del(3)).GetMetadata().GetFinalizers(); !slices.Equal(got, want) {
		t.Fatalf("a second request: finalizers %v, want %v", got, want)
	}
}
