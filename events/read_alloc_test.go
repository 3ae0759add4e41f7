package events_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// A follower handed one event at a time (the projection and every
// reconciler's read during single-object writes) allocates for that event,
// not for a whole batch of them: the bytes allocated per followed event,
// append included, stay well under one batch of messages (512 of them,
// 28 KiB), and every event is delivered once, in order.
func TestReadFollowAllocatesPerEventNotPerBatch(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := make(chan uint64, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.Read(ctx, events.ReadOptions{Follow: true}, func(m events.Message) error {
			seen <- m.Sequence
			return nil
		})
	}()
	step := func(i int) {
		if _, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-seen:
			if s != uint64(i+1) {
				t.Fatalf("follow saw %d, want %d", s, i+1)
			}
		case err := <-done:
			t.Fatalf("follow ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("follow did not see event %d", i+1)
		}
	}
	const warm, n = 50, 400
	for i := range warm {
		step(i)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := warm; i < warm+n; i++ {
		step(i)
	}
	runtime.ReadMemStats(&m1)
	perEvent := (m1.TotalAlloc - m0.TotalAlloc) / n
	t.Logf("%d bytes allocated per followed event", perEvent)
	if perEvent > 24<<10 {
		t.Fatalf("%d bytes allocated per followed event, want under 24 KiB", perEvent)
	}
	cancel()
	<-done
}
