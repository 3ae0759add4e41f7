package reconcilers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// counter counts the runs of each object and reports the same status
// every time.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) Kinds() []string { return []string{"Widget"} }

func (c *counter) Reconcile(_ context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	c.mu.Lock()
	c.runs[obj.Metadata.Name]++
	c.mu.Unlock()
	return reconcilers.Result{Message: "steady"}, nil
}

func (c *counter) Finalize(context.Context, *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{}, nil
}

// fewest is the smallest run count of n objects.
func (c *counter) fewest(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	least := -1
	for i := range n {
		if r := c.runs[fmt.Sprintf("w%d", i)]; least < 0 || r < least {
			least = r
		}
	}
	return least
}

// A resync that finds nothing changed writes nothing: the next run time
// lives in the runtime (Runtime.NextRun), not in the log. 1,000 objects
// through five resync periods (a one-second period instead of ten
// minutes) add no event.
func TestResyncThatChangesNothingWritesNothing(t *testing.T) {
	const n = 1000
	c := &counter{runs: map[string]int{}}
	e := start(t, queue.Config{Resync: time.Second}, c)
	var b strings.Builder
	for i := range n {
		b.WriteString(widget(fmt.Sprintf("w%d", i), "s"))
	}
	e.apply(t, b.String())
	eventually(t, "every object Ready", func() bool {
		for i := range n {
			if !ready(e.store, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	// Every status is written: the first run of each object, and perhaps
	// a second whose write raced the first one's fold. Once every object
	// has run twice more, nothing is still in flight from the burst.
	base := c.fewest(n)
	eventually(t, "two more runs of every object", func() bool { return c.fewest(n) >= base+2 })
	before, err := e.log.LastSequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := projections.Key{Kind: "Widget", Namespace: "ns", Name: "w0"}
	next, ok := e.rt.NextRun(k)
	if !ok || next.IsZero() {
		t.Fatalf("the runtime does not know w0's next run (%v, %v)", next, ok)
	}
	mid := c.fewest(n)
	eventually(t, "five resync periods", func() bool { return c.fewest(n) >= mid+5 })
	after, err := e.log.LastSequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		hist, _ := e.log.History(context.Background(), k.Proto())
		for _, h := range hist {
			t.Logf("w0 event %d %s %v", h.Sequence, h.Type, h.GetObject().GetStatus())
		}
		t.Fatalf("five resyncs of %d unchanged objects appended %d events, want none", n, after-before)
	}
	if later, _ := e.rt.NextRun(k); !later.After(next) {
		t.Fatalf("w0's next run stayed at %v after five resyncs", next)
	}
}
