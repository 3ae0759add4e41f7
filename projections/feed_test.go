package projections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
)

// A feed hands out every change after any sequence, in log order, each with
// the object right after it: the same whether it comes from the live
// store's window or is folded from the log (the window here holds only the
// last 50 changes, so most reads start in the log and move to the window).
func TestFeedHandsOutEveryChangeFromAnyPoint(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	live := projections.NewStore(projections.StoreOptions{WatchWindow: 50})
	startProjector(t, projections.ProjectorConfig{Log: l, Store: live})
	r := rand.New(rand.NewPCG(3, 3))
	evs := randomEvents(r, 400)
	for i, ev := range evs {
		ev.Id = fmt.Sprintf("f%d", i)
	}
	last := appendAll(t, l, evs)
	waitFor(t, live, last)
	feed := projections.Feed{Store: live, Log: l}

	// The reference: every change, read from the start.
	var all []projections.Change
	if err := feed.Read(ctx, projections.FeedOptions{}, func(c projections.Change) error {
		all = append(all, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[len(all)-1].Sequence != last {
		t.Fatalf("read from the start ended at %d, want %d", all[len(all)-1].Sequence, last)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Sequence <= all[i-1].Sequence {
			t.Fatalf("out of order at %d: %d after %d", i, all[i].Sequence, all[i-1].Sequence)
		}
	}
	for _, from := range []uint64{1, 17, last / 2, last - 60, last - 10, last} {
		var got []projections.Change
		if err := feed.Read(ctx, projections.FeedOptions{From: from}, func(c projections.Change) error {
			got = append(got, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var want []projections.Change
		for _, c := range all {
			if c.Sequence > from {
				want = append(want, c)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("from %d: %d changes, want %d", from, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Sequence != w.Sequence || g.Type != w.Type || g.Key != w.Key ||
				g.Object.GetMetadata().GetResourceVersion() != w.Object.GetMetadata().GetResourceVersion() {
				t.Fatalf("from %d, change %d: got %d %s %v, want %d %s %v", from, i, g.Sequence, g.Type, g.Key, w.Sequence, w.Type, w.Key)
			}
		}
	}

	// Following: a change appended later arrives.
	got := make(chan projections.Change, 1000)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = feed.Read(fctx, projections.FeedOptions{From: last, Follow: true}, func(c projections.Change) error {
			got <- c
			return nil
		})
	}()
	more := randomEvents(r, 1)
	more[0].Id = "later"
	next := appendAll(t, l, more)
	select {
	case c := <-got:
		if c.Sequence != next {
			t.Fatalf("followed change %d, want %d", c.Sequence, next)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a following read never saw the new change")
	}
}
