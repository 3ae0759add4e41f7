package integrity_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
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

// BenchmarkChainCost appends and replays with and without the running
// check chaining the stored files beside it (a tick a second, a signed
// checkpoint every two seconds), in the same run: what the chain costs
// the log's two hot paths.
func BenchmarkChainCost(b *testing.B) {
	for _, mode := range []string{"append/without-chain", "append/with-chain", "replay/without-chain", "replay/with-chain"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			_, nc := testenv.NATSWith(b, embedded.Config{StoreDir: dir})
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
			replay := mode[:6] == "replay"
			n := b.N
			if replay {
				n = 200_000
				appendN(n)
			}
			var m *integrity.Monitor
			if mode[len(mode)-10:] == "with-chain" {
				k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
				if err != nil {
					b.Fatal(err)
				}
				m = integrity.NewMonitor(integrity.MonitorConfig{StoreDir: dir, Stream: events.StreamName, Keeper: k,
					Logger: slog.New(slog.DiscardHandler)}, integrity.Report{Stream: events.StreamName})
				mctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go func() { _ = m.Start(mctx) }()
				if replay {
					// The chain has caught up with the log before replays.
					for s, _ := m.Head(); s < uint64(n); s, _ = m.Head() {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
			b.ResetTimer()
			if !replay {
				appendN(b.N)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			} else {
				for range b.N {
					got := 0
					if err := l.Read(ctx, events.ReadOptions{}, func(events.Message) error { got++; return nil }); err != nil {
						b.Fatal(err)
					}
					if got != n {
						b.Fatalf("read %d of %d", got, n)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			}
			b.ReportMetric(0, "ns/op")
			if m != nil && m.Damage() != nil {
				b.Fatal(m.Damage())
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
