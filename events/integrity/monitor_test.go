package integrity_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/events/integrity/integritytest"
	"github.com/jetplane/jetplane/internal/testenv"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startMonitor opens a log in dir on embedded NATS, starts a monitor over
// it that ticks every 20 ms (fix is the hint its damage names) and appends
// n events.
func startMonitor(t *testing.T, dir, fix string, n int) (*integrity.Monitor, *integrity.Keeper) {
	t.Helper()
	_, nc := testenv.NATSAt(t, dir)
	ctx := context.Background()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m := integrity.NewMonitor(integrity.MonitorConfig{
		StoreDir: dir, Stream: events.StreamName, Keeper: k, Logger: slog.New(slog.DiscardHandler),
		Tick: 20 * time.Millisecond, CheckpointEvery: 50 * time.Millisecond, FullEvery: time.Hour, Fix: fix,
	}, integrity.Report{Stream: events.StreamName})
	mctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = m.Start(mctx) }()
	for i := range n {
		if _, err := l.Append(ctx, events.Entry{Event: integritytest.Event(i), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	return m, k
}

// While the server runs, the monitor chains what it stores and signs
// heads; a log cut short under it is found within a tick and a change to
// an event already chained by the next full verify, each named.
func TestMonitorWhileRunning(t *testing.T) {
	dir := t.TempDir()
	m, k := startMonitor(t, dir, "restore", 300)
	eventually(t, "head signed at 300", func() bool { c, ok := k.Last(); return ok && c.Seq == 300 })
	if r := m.Full(); !r.OK() || r.Matched == 0 {
		t.Fatalf("full verify of a whole log: %+v", r)
	}

	// A byte of an event already chained changes: the next full verify
	// names it.
	path := blockFile(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := m.Full()
	if r.OK() || m.Damage() == nil {
		t.Fatal("a changed byte went unnoticed")
	}
	if msg := m.Damage().Error(); !strings.Contains(msg, "sequence") || !strings.Contains(msg, "1.blk") || !strings.Contains(msg, "restore") {
		t.Fatalf("damage: %v", msg)
	}
}

// A log cut short while the server runs is found by the tick, before the
// next full verify.
func TestMonitorFindsTruncationAtOnce(t *testing.T) {
	dir := t.TempDir()
	m, _ := startMonitor(t, dir, "", 200)
	eventually(t, "chained to 200", func() bool { s, _ := m.Head(); return s == 200 })
	if err := os.Truncate(blockFile(t, dir), 1000); err != nil {
		t.Fatal(err)
	}
	eventually(t, "truncation found", func() bool { return m.Damage() != nil })
	if msg := m.Damage().Error(); !strings.Contains(msg, "sequence") || !strings.Contains(msg, "1.blk") {
		t.Fatalf("damage: %v", msg)
	}
}
