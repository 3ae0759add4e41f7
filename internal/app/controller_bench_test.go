package app_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/controller"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// benchController is benchReconciler as a controller of its own.
type benchController struct{}

func (benchController) Kinds() []string { return []string{"Bench"} }

func (benchController) Reconcile(ctx context.Context, obj *schemas.Object) (controller.Status, time.Duration, error) {
	return controller.Status{Message: "size " + obj.GetSpec().GetFields()["size"].String()}, 0, nil
}

func (benchController) Delete(context.Context, *schemas.Object) error { return nil }

// BenchmarkControllerOutOfProcess runs the same reconciler on the same
// burst of 10,000 new objects (applies of 500, 4 at a time) twice in each
// iteration: compiled into jetplane, and as a controller of its own
// (package reconcilers/controller) with its own NATS connection, its own
// projection of the log and its writes through the instances' door. Both
// run 8 workers. The controller runs in the benchmark's process, so CPU
// per object covers both sides; it reports each one's objects/s and the
// ratio.
func BenchmarkControllerOutOfProcess(b *testing.B) {
	const n = 10_000
	var in, out []kubeBurst
	for range b.N {
		for _, remote := range []bool{false, true} {
			cfg := app.Config{Queue: queue.Config{MaxRunning: 8}, DataDir: b.TempDir()}
			var creds string
			if remote {
				creds = benchCreds(b, cfg.DataDir)
			} else {
				cfg.Reconcilers = []reconcilers.Reconciler{benchReconciler()}
			}
			a, c := startApp(b, cfg)
			if remote {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					done <- controller.Run(ctx, controller.Config{NATS: a.NATSURL(), Creds: creds, Queue: queue.Config{MaxRunning: 8}, Logger: slog.New(slog.DiscardHandler)}, benchController{})
				}()
				b.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						b.Errorf("controller: %v", err)
					}
				})
				// Warm up: the controller has joined once it made one
				// object Ready.
				w := watchReady(b, a.Store(), 1, 1)
				if _, err := c.ApplyBrief(context.Background(), "bench", benchDocs(n, n+1, "1"), ""); err != nil {
					b.Fatal(err)
				}
				select {
				case <-w.done:
				case <-time.After(30 * time.Second):
					b.Fatal("the controller made nothing Ready in 30 s")
				}
			}
			w := watchReady(b, a.Store(), 1, n)
			cpu0, t0 := cpuTime(), time.Now()
			sent := burst(b, c, n, "1")
			<-w.done
			elapsed, cpu := time.Since(t0), cpuTime()-cpu0
			r := kubeBurst{ObjectsPerS: float64(n) / elapsed.Seconds(), CPUMsPerObj: float64(cpu.Microseconds()) / 1000 / n}
			r.P50Ms, r.P99Ms = latencies(sent, w, n)
			if remote {
				out = append(out, r)
			} else {
				in = append(in, r)
			}
		}
	}
	mean := func(rs []kubeBurst, f func(kubeBurst) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	rate := func(r kubeBurst) float64 { return r.ObjectsPerS }
	b.ReportMetric(mean(in, rate), "in-process-objects/s")
	b.ReportMetric(mean(out, rate), "controller-objects/s")
	b.ReportMetric(mean(out, rate)/mean(in, rate), "ratio-controller")
	b.ReportMetric(mean(in, func(r kubeBurst) float64 { return r.P99Ms }), "in-process-p99-ms")
	b.ReportMetric(mean(out, func(r kubeBurst) float64 { return r.P99Ms }), "controller-p99-ms")
	b.ReportMetric(mean(in, func(r kubeBurst) float64 { return r.CPUMsPerObj }), "in-process-cpu-ms/object")
	b.ReportMetric(mean(out, func(r kubeBurst) float64 { return r.CPUMsPerObj }), "controller-cpu-ms/object")
	b.ReportMetric(0, "ns/op")
}

// benchCreds makes a controller credential for kind Bench in the data
// directory's store before jetplane starts on it, and returns its file.
func benchCreds(b *testing.B, data string) string {
	s, err := auth.Open(filepath.Join(data, "auth"))
	if err != nil {
		b.Fatal(err)
	}
	creds, err := s.CreateWithKinds(auth.RoleController, "bench", []string{"Bench"})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "bench.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkSingleObjectApply applies 10,000 new objects one a request, 16
// requests in flight, that the reconciler of BenchmarkReconcile reports
// Ready: the single-object form of BenchmarkCompareKube without the
// Kubernetes side, at default durability and with --sync=always, its
// writes made durable by the log's shared fsyncs (the default, decision
// 0083) or by the server's fsyncs with groups committed as atomic batches
// (decision 0069) or pipelined. The requests come from a child process
// (burstSingleChild): cpu-ms/object is the server's and the client's CPU
// together, as it was when the client ran in this process, and
// server-cpu-ms/object and client-cpu-ms/object are its two parts.
func BenchmarkSingleObjectApply(b *testing.B) {
	const n = 10_000
	yes, no := true, false
	for _, c := range []struct {
		name   string
		always bool
		server bool
		atomic *bool
	}{
		{"sync=default", false, false, nil},
		{"sync=always", true, false, nil},
		{"sync=always/server-atomic", true, true, &yes},
		{"sync=always/server-pipelined", true, true, &no},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				a, _ := startApp(b, app.Config{SyncAlways: c.always, ServerSync: c.server, AtomicGroups: c.atomic, Reconcilers: []reconcilers.Reconciler{benchReconciler()},
					Queue: queue.Config{MaxRunning: 8}, APILimits: api.Limits{Rate: -1}})
				w := watchReady(b, a.Store(), 1, n)
				g0, e0 := a.Log().Groups()
				r0 := a.Log().RefusedGroups()
				s0, sw0 := a.Log().Syncs()
				cpu0, t0 := cpuTime(), time.Now()
				sent, client := burstSingleChild(b, a.URL(), n, 16)
				<-w.done
				elapsed, server := time.Since(t0), cpuTime()-cpu0
				g1, e1 := a.Log().Groups()
				if g1 > g0 {
					// Applies and statuses the log committed together.
					b.ReportMetric(float64(e1-e0)/float64(g1-g0), "entries/group")
					// Groups written again entry by entry (one fsync each).
					b.ReportMetric(float64(a.Log().RefusedGroups()-r0), "refused-groups")
				}
				if s1, sw1 := a.Log().Syncs(); s1 > s0 {
					// Appends one fsync of the log's covered.
					b.ReportMetric(float64(sw1-sw0)/float64(s1-s0), "appends/fsync")
				}
				// The server's CPU alone, and the client's (a child process).
				b.ReportMetric(msPerObject(server, n), "server-cpu-ms/object")
				b.ReportMetric(msPerObject(client, n), "client-cpu-ms/object")
				reportBurst(b, n, elapsed, server+client, sent, w)
			}
		})
	}
}
