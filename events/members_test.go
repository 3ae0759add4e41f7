package events_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

func TestMembersAndClaims(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	opts := events.MemberOptions{Heartbeat: 100 * time.Millisecond, Expiry: 500 * time.Millisecond}
	a, err := l.Join(ctx, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Join(ctx, "b.with odd/chars", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(ctx)
	waitLive := func(m *events.Members, want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			live, changed := m.Live()
			if slices.Equal(live, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %v live, want %v", m.Self(), live, want)
			}
			select {
			case <-changed:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitLive(a, "a", "b.with odd/chars")
	waitLive(b, "a", "b.with odd/chars")

	// A claim is exclusive while its holder lives.
	if err := a.Claim(ctx, 3); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = b.Claim(short, 3)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b claimed a partition a holds: %v", err)
	}
	// Released, it goes to the next claimant at once.
	if err := a.Release(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Holder(ctx, 3); h != "b.with odd/chars" {
		t.Fatalf("holder of 3 = %q", h)
	}

	// A holder that dies (no leave, no release) loses its claims once it
	// expires.
	if err := a.Claim(ctx, 5); err != nil {
		t.Fatal(err)
	}
	events.Halt(a)
	start := time.Now()
	if err := b.Claim(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < opts.Expiry/2 {
		t.Fatalf("b took a live holder's claim after %s", took)
	}
	waitLive(b, "b.with odd/chars")
	// A stale release by the old holder does not undo the new claim.
	if err := a.Release(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.Holder(ctx, 5); h != "b.with odd/chars" {
		t.Fatalf("holder of 5 after a stale release = %q", h)
	}
}

// A release whose delete fails keeps the claim, so that trying again
// removes it: forgetting it first would leave the partition claimed by an
// instance that no longer runs it, for as long as that instance lives.
func TestFailedReleaseIsRetried(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	a, err := l.Join(ctx, "a", events.MemberOptions{Heartbeat: 100 * time.Millisecond, Expiry: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx, 2); err != nil {
		t.Fatal(err)
	}
	events.Halt(a) // a fault in the bucket's answers, not a's death: a's view still counts itself live
	down := errors.New("injected: no responders")
	events.FailDeletes(a, down)
	if err := a.Release(ctx, 2); !errors.Is(err, down) {
		t.Fatalf("release while the bucket fails = %v, want the failure", err)
	}
	if h, _ := a.Holder(ctx, 2); h != "a" {
		t.Fatalf("holder after a failed release = %q, want a", h)
	}
	events.FailDeletes(a, nil)
	if err := a.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Holder(ctx, 2); h != "" {
		t.Fatalf("holder after the release was retried = %q, want none", h)
	}
}

// A process that stops before its release lands leaves its claim behind;
// when a process comes back under the same name, that name is live again,
// so no one else may take the claim. The returning instance sweeps claims
// that name it but that it does not hold, and the partition is free again.
// (Seen in the fault suite: a whole-cluster restart left one partition
// unrun for minutes.)
func TestRejoinSweepsClaimsLeftUnderItsName(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	opts := events.MemberOptions{Heartbeat: 100 * time.Millisecond, Expiry: 500 * time.Millisecond}
	old, err := l.Join(ctx, "i3", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Claim(ctx, 0); err != nil {
		t.Fatal(err)
	}
	events.Halt(old) // stopped with its release never made
	back, err := l.Join(ctx, "i3", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Leave(ctx)
	other, err := l.Join(ctx, "i1", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Leave(ctx)
	claimed, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := other.Claim(claimed, 0); err != nil {
		h, _ := other.Holder(ctx, 0)
		t.Fatalf("i1 could not claim partition 0 (held by %q) while i3 lives again: %v", h, err)
	}
	if err := back.Claim(ctx, 1); err != nil { // the returning instance still claims what it is given
		t.Fatal(err)
	}
	if h, _ := back.Holder(ctx, 1); h != "i3" {
		t.Fatalf("holder of 1 = %q, want i3", h)
	}
}

// An instance's lease ends before any other instance can count it gone:
// an instance whose heartbeats stop landing (its process paused, or cut off
// from the bucket) stops its runs by then, and the others take its
// partitions only after. A heartbeat landing after the lease ended starts
// a new lease.
func TestLeaseEndsBeforeTheOthersCountTheInstanceGone(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	opts := events.MemberOptions{Heartbeat: 100 * time.Millisecond, Expiry: 600 * time.Millisecond}
	a, err := l.Join(ctx, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Join(ctx, "b", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(ctx)
	for {
		if live, _ := b.Live(); slices.Contains(live, "a") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	until, lost := a.Lease()
	if now := time.Now(); !until.After(now) || until.After(now.Add(opts.Expiry)) {
		t.Fatalf("a's lease ends at %s, %s from now; want within the expiry (%s)", until, until.Sub(now), opts.Expiry)
	}
	select {
	case <-lost:
		t.Fatal("a's lease is lost while it beats")
	default:
	}

	events.Halt(a) // its heartbeats stop, as when its process is paused
	until, _ = a.Lease()
	deadline := time.Now().Add(10 * time.Second)
	for {
		live, _ := b.Live()
		if !slices.Contains(live, "a") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never counted a gone")
		}
		time.Sleep(5 * time.Millisecond)
	}
	gone := time.Now()
	if !gone.After(until) {
		t.Fatalf("b counted a gone at %s, before a's lease ended (%s)", gone.Format(time.StampMicro), until.Format(time.StampMicro))
	}
	ended, lostNow := a.Lease()
	select {
	case <-lostNow:
	default:
		t.Fatalf("a's lease still holds after b counted a gone (it ends %s)", ended.Format(time.StampMicro))
	}
	select {
	case <-lost:
	default:
		t.Fatal("the channel of a's lease was not closed when it ended")
	}

	// A heartbeat that lands now starts a new lease.
	if err := events.Beat(ctx, a); err != nil {
		t.Fatal(err)
	}
	renewed, lostAgain := a.Lease()
	if lostAgain == lost || !renewed.After(time.Now()) {
		t.Fatalf("after a new heartbeat: lease until %s (same channel: %v), want a new lease", renewed, lostAgain == lost)
	}
	select {
	case <-lostAgain:
		t.Fatal("the new lease is lost already")
	default:
	}
}
