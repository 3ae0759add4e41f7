package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// cpuTime is the process's user+system CPU time: every part of jetplane
// (NATS server, projection, runtime, API) and the benchmark's client run in
// this one process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readyAt watches the store and records when each key first shows Ready
// with observedGeneration equal to generation gen.
type readyAt struct {
	mu   sync.Mutex
	at   map[string]time.Time
	gen  int64
	want int
	done chan struct{}
}

func watchReady(b *testing.B, st *projections.Store, gen int64, want int) *readyAt {
	r := &readyAt{at: map[string]time.Time{}, gen: gen, want: want, done: make(chan struct{})}
	ch, stop, err := st.Watch(projections.Query{Kind: "Bench"}, st.Seq())
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer stop()
		for c := range ch {
			o := c.Object
			if c.Type == projections.Deleted || o.Metadata.Generation != r.gen || o.Status.GetObservedGeneration() != r.gen || !reconcilers.IsReady(o) {
				continue
			}
			r.mu.Lock()
			if _, seen := r.at[c.Key.Name]; !seen {
				r.at[c.Key.Name] = time.Now()
				if len(r.at) == r.want {
					close(r.done)
					r.mu.Unlock()
					return
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// benchDocs writes manifests as JSON documents, as the CLI and API clients
// send them.
func benchDocs(from, to int, size string) []byte {
	var sb strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&sb, `{"apiVersion":"v1","kind":"Bench","metadata":{"name":"o-%d","namespace":"bench"},"spec":{"size":%s}}`+"\n---\n", i, size)
	}
	return []byte(sb.String())
}

// reportBurst reports a burst's figures: objects/s end to end, apply →
// status p50 and p99, and CPU per object.
func reportBurst(b *testing.B, n int, elapsed, cpu time.Duration, sent map[string]time.Time, w *readyAt) {
	lat := make([]time.Duration, 0, n)
	for name, at := range w.at {
		lat = append(lat, at.Sub(sent[name]))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "objects/s")
	b.ReportMetric(lat[n/2].Seconds()*1000, "p50-ms")
	b.ReportMetric(lat[n*99/100].Seconds()*1000, "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/object")
	b.ReportMetric(0, "ns/op")
}

// burst applies n objects over HTTP in requests of 500, four at a time,
// asking for the brief answer as a bulk client does, and returns when each
// request started, per object name.
func burst(b *testing.B, c *api.Client, n int, size string) map[string]time.Time {
	return burstOver(b, []*api.Client{c}, n, size)
}

// burstOver is burst with requests spread over several instances' APIs.
func burstOver(b *testing.B, clients []*api.Client, n int, size string) map[string]time.Time {
	sent := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, from := 0, 0; from < n; i, from = i+1, from+500 {
		to := min(from+500, n)
		c := clients[i%len(clients)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			if _, err := c.ApplyBrief(context.Background(), "bench", benchDocs(from, to, size), ""); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			for i := from; i < to; i++ {
				sent[fmt.Sprint("o-", i)] = start
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return sent
}

// BenchmarkReconcile measures the reconciler runtime the way the reference
// controller was measured: a reconciler that reads each object (the
// runtime hands it the latest projected state) and writes its status; a
// burst of 10,000 new objects, then an update of all of them. It reports
// objects/s end to end (first apply to last status), apply → status p50 and
// p99, and CPU per object across the whole process. BenchmarkReconcileOne
// reports single-object latency.
func BenchmarkReconcile(b *testing.B) {
	const n = 10_000
	for _, sync := range []string{"default", "always"} {
		for _, phase := range []string{"create", "update"} {
			b.Run(fmt.Sprintf("sync=%s/%s", sync, phase), func(b *testing.B) {
				for range b.N {
					a, c := startApp(b, app.Config{SyncAlways: sync == "always", Reconcilers: []reconcilers.Reconciler{benchReconciler()}, Queue: queue.Config{MaxRunning: benchWorkers}})
					gen := int64(1)
					if phase == "update" {
						w := watchReady(b, a.Store(), 1, n)
						burst(b, c, n, "1")
						<-w.done
						gen = 2
					}
					w := watchReady(b, a.Store(), gen, n)
					cpu0, t0 := cpuTime(), time.Now()
					sent := burst(b, c, n, fmt.Sprint(gen))
					<-w.done
					reportBurst(b, n, time.Since(t0), cpuTime()-cpu0, sent, w)
				}
			})
		}
	}
}

// BenchmarkReconcileThreeInstances is BenchmarkReconcile's create and
// update bursts on three jetplane instances, each on its own node of a
// three-node NATS cluster with an R3 log, all in this process (so CPU per
// object covers every instance and every NATS node). Applies are spread
// over the three APIs; readiness is watched on one instance's projection.
func BenchmarkReconcileThreeInstances(b *testing.B) {
	const n = 10_000
	for _, phase := range []string{"create", "update"} {
		b.Run(phase, func(b *testing.B) {
			for range b.N {
				cluster := testenv.NATSCluster(b, 3)
				apps := make([]*app.App, 3)
				clients := make([]*api.Client, 3)
				for i, srv := range cluster.Servers {
					apps[i], clients[i] = startApp(b, app.Config{
						NATS: events.ConnectOptions{URLs: srv.ClientURL()}, Log: events.Config{Replicas: 3},
						Instance: fmt.Sprint("bench-", i), Reconcilers: []reconcilers.Reconciler{benchReconciler()},
						Queue: queue.Config{MaxRunning: benchWorkers},
					})
				}
				// Start once the partitions have settled, every instance
				// holding its share (16/3 or one more): a burst during
				// the hand-overs would measure those.
				for !settled(apps, 16) {
					time.Sleep(50 * time.Millisecond)
				}
				gen := int64(1)
				if phase == "update" {
					w := watchReady(b, apps[0].Store(), 1, n)
					burstOver(b, clients, n, "1")
					<-w.done
					gen = 2
				}
				w := watchReady(b, apps[0].Store(), gen, n)
				cpu0, t0 := cpuTime(), time.Now()
				sent := burstOver(b, clients, n, fmt.Sprint(gen))
				<-w.done
				reportBurst(b, n, time.Since(t0), cpuTime()-cpu0, sent, w)
			}
		})
	}
}

// settled reports whether apps together hold all n partitions, each its
// even share.
func settled(apps []*app.App, n int) bool {
	total := 0
	for _, a := range apps {
		held := len(a.Partitions())
		if held < n/len(apps) {
			return false
		}
		total += held
	}
	return total == n
}

func BenchmarkReconcileOne(b *testing.B) {
	a, c := startApp(b, app.Config{Reconcilers: []reconcilers.Reconciler{benchReconciler()}})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		w := watchReady(b, a.Store(), 1, 1)
		start := time.Now()
		if _, err := c.Apply(context.Background(), "one", benchDocs(100000+i, 100001+i, "1"), ""); err != nil {
			b.Fatal(err)
		}
		<-w.done
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2].Seconds()*1000, "p50-ms")
	b.ReportMetric(lat[len(lat)*99/100].Seconds()*1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// benchWorkers is how many runs of a kind may be in flight (the queue's
// MaxRunning): 8, as the reference controller ran, unless
// JETPLANE_BENCH_WORKERS says otherwise.
var benchWorkers = func() int {
	if n, err := strconv.Atoi(os.Getenv("JETPLANE_BENCH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 8
}()

// benchReconciler reads the object it is given and reports it Ready; the
// runtime writes the status.
func benchReconciler() reconcilers.Reconciler {
	return reconcilers.Funcs{
		KindList: []string{"Bench"},
		ReconcileFunc: func(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
			return reconcilers.Result{Message: "size " + obj.GetSpec().GetFields()["size"].String()}, nil
		},
	}
}
