package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// deleteWriter records deletions, holding each a moment so that
// concurrent ones overlap, and fails the keys in fail.
type deleteWriter struct {
	Writer
	fail map[string]bool

	mu               sync.Mutex
	deleted          []string
	running, maxSeen int
}

func (w *deleteWriter) Delete(_ context.Context, _ *schemas.Object, actor string, k projections.Key) error {
	w.mu.Lock()
	w.running++
	w.maxSeen = max(w.maxSeen, w.running)
	w.mu.Unlock()
	time.Sleep(time.Millisecond) // a round trip, for the overlap
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	w.deleted = append(w.deleted, k.Name)
	if w.fail[k.Name] {
		return errors.New("refused")
	}
	return nil
}

// A ReplicaSet's surplus is deleted deleteParallel at a time, every
// deletion tried even when one fails, the failures reported together.
func TestDeleteAllDeletesEveryKeyBoundedly(t *testing.T) {
	w := &deleteWriter{fail: map[string]bool{"p3": true, "p70": true}}
	r := &Reconciler{cfg: Config{Writer: w}}
	var keys []projections.Key
	for i := range 100 {
		keys = append(keys, projections.Key{Kind: KindPod, Namespace: "ns", Name: fmt.Sprintf("p%d", i)})
	}
	owner := &schemas.Object{Kind: "ReplicaSet", ApiVersion: "apps/v1", Metadata: &schemas.ObjectMeta{Name: "rs", Namespace: "ns"}}
	err := r.deleteAll(context.Background(), owner, keys)
	if err == nil {
		t.Fatal("two refused deletions reported no error")
	}
	for _, want := range []string{"delete p3: refused", "delete p70: refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(w.deleted) != len(keys) {
		t.Fatalf("%d deletions tried, want %d", len(w.deleted), len(keys))
	}
	if w.maxSeen > deleteParallel || w.maxSeen < 2 {
		t.Fatalf("%d deletions at once; want between 2 and %d", w.maxSeen, deleteParallel)
	}
}
