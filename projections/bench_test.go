package projections_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// benchEvents is the log size for replay benchmarks: 1,000,000 unless
// JETPLANE_BENCH_EVENTS says otherwise.
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

// replayMix is a realistic mix over 100,000 keys: applies of small objects
// (labels, a group, a dependsOn), status writes, and deletes.
func replayMix(i int) *schemas.Event {
	k := &schemas.ObjectKey{Kind: "ConfigMap", Namespace: fmt.Sprint("ns-", i%10), Name: fmt.Sprint("cm-", i%100_000)}
	ev := &schemas.Event{Key: k, Actor: "user/bench", Time: timestamppb.Now()}
	switch i % 10 {
	case 7, 8:
		ev.Type = schemas.EventType_EVENT_TYPE_STATUS_CHANGED
		ev.Object = &schemas.Object{Status: &schemas.Status{Phase: "Ready", ObservedGeneration: int64(i / 100_000)}}
	case 9:
		if i%20 == 9 {
			ev.Type = schemas.EventType_EVENT_TYPE_DELETE_REQUESTED
			break
		}
		ev.Type = schemas.EventType_EVENT_TYPE_FINALIZED
	default:
		spec, _ := structpb.NewStruct(map[string]any{"LOG_LEVEL": "info", "replicas": float64(i % 5)})
		ev.Type = schemas.EventType_EVENT_TYPE_APPLIED
		ev.Object = &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Spec: spec, Metadata: &schemas.ObjectMeta{
			Labels: map[string]string{"app": fmt.Sprint("app-", i%50)}, Group: fmt.Sprint("g-", i%20), Generation: int64(i/100_000 + 1),
			DependsOn: []*schemas.ObjectKey{{Kind: "ConfigMap", Name: fmt.Sprint("cm-", (i+1)%100_000)}},
		}}
	}
	return ev
}

// BenchmarkReplay folds the whole log (1,000,000 events by default) from
// sequence 1, reading from JetStream, as an as-of query or a restart without
// a snapshot does. The reference, in the same run on the same log, is a raw
// JetStream ordered consumer reading every message without decoding: the
// ceiling any replay through the JetStream client can reach.
func BenchmarkReplay(b *testing.B) {
	n := benchEvents(b)
	l := testenv.Log(b, events.Config{})
	ctx := context.Background()
	var last uint64
	for start := 0; start < n; start += events.MaxBatch {
		entries := make([]events.Entry, min(events.MaxBatch, n-start))
		for j := range entries {
			entries[j] = events.Entry{Event: replayMix(start + j), Expect: events.AnyVersion}
		}
		res, errs := l.AppendAsync(ctx, entries)
		if errs != nil {
			b.Fatal(errs)
		}
		last = res[len(res)-1].Sequence
	}
	b.Run("raw-jetstream-read", func(b *testing.B) {
		cpu0 := cpuTime()
		for range b.N {
			got := 0
			if err := l.Read(ctx, events.ReadOptions{}, func(events.Message) error { got++; return nil }); err != nil {
				b.Fatal(err)
			}
			if got != n {
				b.Fatalf("read %d of %d events", got, n)
			}
		}
		report(b, n, cpu0)
	})
	// Log.Scan alone, nothing decoded, with 1, 2 and 4 ranges read at
	// once: what reading in parallel gains on this machine.
	for _, par := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("raw-scan-parallel-%d", par), func(b *testing.B) {
			cpu0 := cpuTime()
			for range b.N {
				got := 0
				if err := l.Scan(ctx, events.ScanOptions{Parallel: par}, func(c []events.Message, _ any) error { got += len(c); return nil }); err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("read %d of %d events", got, n)
				}
			}
			report(b, n, cpu0)
		})
	}
	b.Run("as-of", func(b *testing.B) {
		cpu0 := cpuTime()
		for range b.N {
			st, err := projections.StateAt(ctx, l, nil, last)
			if err != nil {
				b.Fatal(err)
			}
			if st.Seq() != last {
				b.Fatalf("replay stopped at %d of %d", st.Seq(), last)
			}
		}
		report(b, n, cpu0)
	})
	// A restart without a snapshot: the projector catches up, then builds
	// every index.
	b.Run("catch-up", func(b *testing.B) {
		cpu0 := cpuTime()
		for range b.N {
			st := projections.NewStore(projections.StoreOptions{})
			p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: st, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Start(pctx) }()
			if err := st.WaitFor(ctx, last); err != nil {
				b.Fatal(err)
			}
			// Ready follows the index build. Polled, not spun: a busy
			// loop here took a core from the build it waited for.
			for !p.Ready() {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
		}
		report(b, n, cpu0)
	})
}

// BenchmarkFold is the fold alone: decoding and applying pre-encoded events
// from memory, without JetStream. Comparing it with BenchmarkReplay shows
// what reading the log costs.
func BenchmarkFold(b *testing.B) {
	n := benchEvents(b)
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i], _ = proto.Marshal(replayMix(i))
	}
	b.ResetTimer()
	for range b.N {
		st := projections.NewStore(projections.StoreOptions{})
		for i, p := range payloads {
			ev, err := events.DecodeRecord(p, uint64(i+1))
			if err != nil {
				b.Fatal(err)
			}
			st.Apply(ev)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}

// report states a replay sub-benchmark's rate and its CPU per event: the
// whole process's user+system time (the embedded NATS server included)
// over the events read, the figure a busy machine changes least.
func report(b *testing.B, n int, cpu0 time.Duration) {
	total := float64(n) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1000/total, "cpu-us/event")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
