package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/retry"
)

func TestPauseGrowsToMax(t *testing.T) {
	b := retry.Backoff{First: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Pause(i + 1); got != w*time.Millisecond {
			t.Fatalf("pause %d = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	if got := retry.Constant(time.Second).Pause(7); got != time.Second {
		t.Fatalf("constant pause = %s", got)
	}
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	var notified []int
	err := retry.Do(context.Background(), retry.Constant(time.Millisecond),
		func(n int, _ error, _ time.Duration) { notified = append(notified, n) },
		func(n int) error {
			if n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	if err != nil || len(notified) != 2 {
		t.Fatalf("err %v, notified %v; want success after two retries", err, notified)
	}
}

func TestDoStopsAtPermanent(t *testing.T) {
	bad := errors.New("bad filter")
	calls := 0
	err := retry.Do(context.Background(), retry.Constant(time.Millisecond), nil, func(int) error {
		calls++
		return retry.Permanent(bad)
	})
	if err != bad || calls != 1 {
		t.Fatalf("err %v after %d calls; want the permanent error after one", err, calls)
	}
}

// A pause ends when the context does: a stopping caller is not held for
// the rest of a long backoff.
func TestDoHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	failing := errors.New("unavailable")
	done := make(chan error, 1)
	go func() {
		done <- retry.Do(ctx, retry.Constant(time.Hour), nil, func(int) error { return failing })
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, failing) {
			t.Fatalf("err = %v; want the cancellation and the last failure", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Do slept through its context's end")
	}
	if retry.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context reported a full pause")
	}
}

func TestOften(t *testing.T) {
	var got []int
	for n := 1; n <= 30; n++ {
		if retry.Often(n) {
			got = append(got, n)
		}
	}
	if len(got) != 4 || got[0] != 1 || got[3] != 30 {
		t.Fatalf("logged attempts %v, want 1, 10, 20, 30", got)
	}
}
