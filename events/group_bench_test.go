package events_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/testenv"
)

// BenchmarkAppendEachConcurrent has writers that each append one entry at
// a time through AppendEach, as concurrent single-object requests do, on a
// server that fsyncs every write (--sync=always): with every group of two
// or more written as one atomic batch (atomic), with groups atomic only
// from Config.MinAtomicGroup's default on (default, decision 0086), and
// with every entry pipelined on its own (pipelined). It reports entries/s
// and the process's CPU per entry (the embedded server runs in it).
func BenchmarkAppendEachConcurrent(b *testing.B) {
	modes := []struct {
		name      string
		atomic    bool
		minAtomic int
	}{{"atomic", true, 2}, {"default", true, 0}, {"pipelined", false, 0}}
	for _, writers := range []int{8, 24, 64} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("writers=%d/%s", writers, m.name), func(b *testing.B) {
				_, nc := testenv.NATSWith(b, embedded.Config{SyncAlways: true})
				ctx := context.Background()
				l, err := events.Open(ctx, nc, events.Config{AtomicGroups: m.atomic, MinAtomicGroup: m.minAtomic})
				if err != nil {
					b.Fatal(err)
				}
				const perWriter = 200
				n := writers * perWriter * b.N
				cpu0, t0 := processCPU(), time.Now()
				if err := testenv.Spread(n, writers, func(i int) error {
					if _, errs := l.AppendEach(ctx, []events.Entry{{Event: benchEvent(i), Expect: 0}}); errs != nil {
						return errs[0]
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				elapsed, cpu := time.Since(t0), processCPU()-cpu0
				b.ReportMetric(float64(n)/elapsed.Seconds(), "entries/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/entry")
				groups, grouped := l.Groups()
				if groups > 0 {
					b.ReportMetric(float64(grouped)/float64(groups), "entries/group")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
