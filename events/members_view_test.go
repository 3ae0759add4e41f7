package events

import (
	"slices"
	"testing"
	"time"
)

// TestMembersJudgeSilenceOnTheBucket drives the live view with heartbeats
// as the bucket stores them: a stall of the bucket (nobody's heartbeats
// land) makes nobody gone, and an instance is gone only after the bucket
// stored Expiry's worth, and three, of this instance's heartbeats since the
// other's last.
func TestMembersJudgeSilenceOnTheBucket(t *testing.T) {
	m := &Members{self: "a", opts: MemberOptions{}.withDefaults(), heard: map[string]heard{}, changed: make(chan struct{})}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rev uint64
	beat := func(name string, at time.Duration) {
		rev++
		m.note(memberUpdate{key: memberKey(name), created: t0.Add(at), revision: rev})
		m.refresh()
	}
	want := func(live ...string) {
		t.Helper()
		if got, _ := m.Live(); !slices.Equal(got, live) {
			t.Fatalf("live = %v, want %v", got, live)
		}
	}
	hb := 500 * time.Millisecond
	at := time.Duration(0)
	for ; at <= 2*time.Second; at += hb {
		beat("a", at)
		beat("b", at+hb/2)
	}
	want("a", "b")
	// The bucket stalls for 8 s; then a's heartbeat lands before b's.
	at += 8 * time.Second
	beat("a", at)
	want("a", "b")
	beat("a", at+hb)
	want("a", "b")
	beat("b", at+hb+hb/2)
	want("a", "b")
	// b dies: gone once 3 s of a's heartbeats have landed since b's last.
	last := at + hb + hb/2
	for at += 2 * hb; at-last < 3*time.Second; at += hb {
		beat("a", at)
		want("a", "b")
	}
	beat("a", at)
	want("a")
	// b's last heartbeat again (read once more) changes nothing; a new
	// one brings it back.
	m.note(memberUpdate{key: memberKey("b"), created: t0.Add(last), revision: 1})
	m.refresh()
	want("a")
	beat("b", at+hb/2)
	want("a", "b")
	// Deleted (left): gone at once.
	m.note(memberUpdate{key: memberKey("b"), deleted: true})
	m.refresh()
	want("a")
}
