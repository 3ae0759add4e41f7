package integrity_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/events/integrity/integritytest"
	"github.com/jetplane/jetplane/internal/testenv"
)

// benchEvents is JETPLANE_BENCH_EVENTS, default 1,000,000.
func benchEvents(b *testing.B) int {
	if v := os.Getenv("JETPLANE_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("JETPLANE_BENCH_EVENTS: %v", err)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkVerify verifies a whole log (1,000,000 events by default) by
// reading its block files: offline on the stopped store, and with the
// server running on it (what GET /v1/verify does). It fails unless the
// intact log verifies.
func BenchmarkVerify(b *testing.B) {
	n := benchEvents(b)
	dir := b.TempDir()
	integritytest.Fill(b, dir, 0, n)
	k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	store, err := integrity.OpenStore(dir, events.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	first, err := integrity.Verify(store, events.StreamName, nil, integrity.VerifyOptions{})
	if err != nil || !first.OK() || first.Events != uint64(n) {
		b.Fatalf("intact log: %+v %v", first, err)
	}
	if _, err := k.Add(first.Last, first.Head, time.Now(), 0); err != nil {
		b.Fatal(err)
	}
	verify := func(b *testing.B, running bool) {
		cpu0 := cpuTime()
		for range b.N {
			r, err := integrity.Verify(store, events.StreamName, k.All(), integrity.VerifyOptions{Running: running})
			if err != nil || !r.OK() || r.Events != uint64(n) || r.Matched != 1 {
				b.Fatalf("verify: %+v %v", r, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		// On a shared machine the wall clock counts other processes' time
		// too; events per second of this process's CPU does not.
		b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("offline", func(b *testing.B) { verify(b, false) })
	b.Run("server-running", func(b *testing.B) {
		testenv.NATSAt(b, dir)
		verify(b, true)
	})
}

// BenchmarkChainCost measures what the chain costs the log's two hot
// paths: appends (b.N events per run) and a replay of 200,000 events
// (fewer with JETPLANE_BENCH_EVENTS),
// each on a fresh server, with and without the running check chaining the
// stored files beside it (a tick a second, a signed and synced checkpoint
// every two seconds). Runs alternate in ABBA order, six of each, in one
// process; the cost is the median of the pairs' ratios.
func BenchmarkChainCost(b *testing.B) {
	for _, path := range []string{"append", "replay"} {
		b.Run(path, func(b *testing.B) {
			var with, without, costs []float64
			for r := range 6 {
				order := []bool{false, true}
				if r%2 == 1 {
					order = []bool{true, false}
				}
				var pair [2]float64
				for _, chained := range order {
					rate := chainRun(b, path, chained)
					if chained {
						with, pair[1] = append(with, rate), rate
					} else {
						without, pair[0] = append(without, rate), rate
					}
				}
				costs = append(costs, 100*(1-pair[1]/pair[0]))
			}
			b.ReportMetric(median(without), "events/s-without")
			b.ReportMetric(median(with), "events/s-with")
			b.ReportMetric(median(costs), "cost-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// chainRun is one run of BenchmarkChainCost: events per second.
func chainRun(b *testing.B, path string, chained bool) float64 {
	dir := b.TempDir()
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		b.Fatal(err)
	}
	appendN := func(n int) {
		for start := 0; start < n; start += events.MaxBatch {
			entries := make([]events.Entry, min(events.MaxBatch, n-start))
			for j := range entries {
				entries[j] = events.Entry{Event: integritytest.Event(start + j), Expect: events.AnyVersion}
			}
			if _, errs := l.AppendAsync(ctx, entries); errs != nil {
				b.Fatal(errs)
			}
		}
	}
	n := b.N
	if path == "replay" {
		n = min(200_000, benchEvents(b))
		appendN(n)
	}
	var m *integrity.Monitor
	if chained {
		k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
		if err != nil {
			b.Fatal(err)
		}
		m = integrity.NewMonitor(integrity.MonitorConfig{StoreDir: dir, Stream: events.StreamName, Keeper: k,
			Logger: slog.New(slog.DiscardHandler)}, integrity.Report{Stream: events.StreamName})
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = m.Start(mctx) }()
		if path == "replay" {
			// The chain has caught up with the log before the replay.
			for s, _ := m.Head(); s < uint64(n); s, _ = m.Head() {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	began := time.Now()
	if path == "append" {
		appendN(n)
	} else {
		got := 0
		if err := l.Read(ctx, events.ReadOptions{}, func(events.Message) error { got++; return nil }); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("read %d of %d", got, n)
		}
	}
	rate := float64(n) / time.Since(began).Seconds()
	if m != nil && m.Damage() != nil {
		b.Fatal(m.Damage())
	}
	return rate
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
