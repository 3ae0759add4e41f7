//go:build unix

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
)

// kubeBurst is what internal/tools/crbench prints.
// jetplane's single-object bursts also fill in the server's and the
// client's parts of CPUMsPerObj.
type kubeBurst struct {
	ObjectsPerS       float64 `json:"objects_per_s"`
	P50Ms             float64 `json:"p50_ms"`
	P99Ms             float64 `json:"p99_ms"`
	CPUMsPerObj       float64 `json:"cpu_ms_per_object"`
	ServerCPUMsPerObj float64 `json:"-"`
	ClientCPUMsPerObj float64 `json:"-"`
}

func (r kubeBurst) rate() float64 { return r.ObjectsPerS }
func (r kubeBurst) p99() float64  { return r.P99Ms }
func (r kubeBurst) cpu() float64  { return r.CPUMsPerObj }

// meanOf is the mean of f over the runs rs.
func meanOf(rs []kubeBurst, f func(kubeBurst) float64) float64 {
	s := 0.0
	for _, r := range rs {
		s += f(r)
	}
	return s / float64(len(rs))
}

// BenchmarkCompareKube runs the same burst of 10,000 new objects, each
// read by a reconciler that then reports it Ready with 8 workers, against
// the Kubernetes stack and against jetplane, one after the other in each
// iteration: kube-apiserver on etcd (both real, from internal/testenv/kube)
// with a controller-runtime controller (internal/tools/crbench, its own
// module), twice (etcd with --unsafe-no-fsync, then etcd fsyncing every
// write before it answers, as in production: kubeenv.Fsync), then
// jetplane at default durability, then jetplane with --sync=always.
// jetplane's default fsyncs on an interval: its like-for-like peer is the
// etcd that does not fsync (the *-nofsync-peer ratios); --sync=always is
// read against the fsyncing etcd. The ratios without a suffix are, as
// before, against the fsyncing etcd.
//
// The Kubernetes side creates objects one request each, 16 at a time (it
// has no bulk create). jetplane runs each durability twice: applies of 500
// objects a request, 4 at a time, as its CLI and API clients send them;
// and the single-object form, one object a request, 16 at a time, as the
// Kubernetes side sends them (the API's per-token rate limit off, as the
// Kubernetes client's is). CPU per object covers etcd, kube-apiserver and
// the controller's process (with its client), and jetplane with its
// burst's client. The single-object client runs in a child process, so
// jetplane's server's CPU (with the benchmark's in-process watcher, a
// store watch) is also reported alone (*-server-cpu-ms/object), and the
// client's beside it; *-cpu-ms/object is their sum.
func BenchmarkCompareKube(b *testing.B) {
	const n = 10_000
	var kube, kubeNoFsync, jpDefault, jpAlways, jpSingle, jpSingleAlways []kubeBurst
	for range b.N {
		kubeNoFsync = append(kubeNoFsync, kubeBurstOn(b, n))
		kube = append(kube, kubeBurstOn(b, n, kubeenv.Fsync()))

		for _, single := range []bool{false, true} {
			for _, always := range []bool{false, true} {
				a, c := startApp(b, app.Config{SyncAlways: always, Reconcilers: []reconcilers.Reconciler{benchReconciler()}, Queue: queue.Config{MaxRunning: 8},
					APILimits: api.Limits{Rate: -1}})
				w := watchReady(b, a.Store(), 1, n)
				cpu0, t0 := cpuTime(), time.Now()
				var sent map[string]time.Time
				var client time.Duration
				if single {
					sent, client = burstSingleChild(b, a.URL(), n, 16)
				} else {
					sent = burst(b, c, n, "1")
				}
				<-w.done
				elapsed, server := time.Since(t0), cpuTime()-cpu0
				r := kubeBurst{ObjectsPerS: float64(n) / elapsed.Seconds(), CPUMsPerObj: msPerObject(server+client, n),
					ServerCPUMsPerObj: msPerObject(server, n), ClientCPUMsPerObj: msPerObject(client, n)}
				r.P50Ms, r.P99Ms = latencies(sent, w, n)
				switch {
				case single && always:
					jpSingleAlways = append(jpSingleAlways, r)
				case single:
					jpSingle = append(jpSingle, r)
				case always:
					jpAlways = append(jpAlways, r)
				default:
					jpDefault = append(jpDefault, r)
				}
			}
		}
	}
	mean, rate, p99, cpu := meanOf, kubeBurst.rate, kubeBurst.p99, kubeBurst.cpu
	server := func(r kubeBurst) float64 { return r.ServerCPUMsPerObj }
	client := func(r kubeBurst) float64 { return r.ClientCPUMsPerObj }
	b.ReportMetric(mean(kube, rate), "kube-objects/s")
	b.ReportMetric(mean(kubeNoFsync, rate), "kube-nofsync-objects/s")
	b.ReportMetric(mean(jpDefault, rate), "jetplane-objects/s")
	b.ReportMetric(mean(jpAlways, rate), "jetplane-sync-always-objects/s")
	b.ReportMetric(mean(jpDefault, rate)/mean(kube, rate), "ratio-default")
	b.ReportMetric(mean(jpDefault, rate)/mean(kubeNoFsync, rate), "ratio-default-nofsync-peer")
	b.ReportMetric(mean(jpAlways, rate)/mean(kube, rate), "ratio-sync-always")
	b.ReportMetric(mean(jpSingle, rate), "single-jetplane-objects/s")
	b.ReportMetric(mean(jpSingleAlways, rate), "single-jetplane-sync-always-objects/s")
	b.ReportMetric(mean(jpSingle, rate)/mean(kube, rate), "single-ratio-default")
	b.ReportMetric(mean(jpSingle, rate)/mean(kubeNoFsync, rate), "single-ratio-default-nofsync-peer")
	b.ReportMetric(mean(jpSingleAlways, rate)/mean(kube, rate), "single-ratio-sync-always")
	b.ReportMetric(mean(jpSingle, p99), "single-jetplane-p99-ms")
	b.ReportMetric(mean(jpSingleAlways, p99), "single-jetplane-sync-always-p99-ms")
	b.ReportMetric(mean(jpSingle, cpu), "single-jetplane-cpu-ms/object")
	b.ReportMetric(mean(jpSingleAlways, cpu), "single-jetplane-sync-always-cpu-ms/object")
	b.ReportMetric(mean(jpSingle, server), "single-jetplane-server-cpu-ms/object")
	b.ReportMetric(mean(jpSingleAlways, server), "single-jetplane-sync-always-server-cpu-ms/object")
	b.ReportMetric(mean(jpSingle, client), "single-jetplane-client-cpu-ms/object")
	b.ReportMetric(mean(jpSingleAlways, client), "single-jetplane-sync-always-client-cpu-ms/object")
	b.ReportMetric(mean(kube, p99), "kube-p99-ms")
	b.ReportMetric(mean(kubeNoFsync, p99), "kube-nofsync-p99-ms")
	b.ReportMetric(mean(jpDefault, p99), "jetplane-p99-ms")
	b.ReportMetric(mean(jpAlways, p99), "jetplane-sync-always-p99-ms")
	b.ReportMetric(mean(kube, cpu), "kube-cpu-ms/object")
	b.ReportMetric(mean(kubeNoFsync, cpu), "kube-nofsync-cpu-ms/object")
	b.ReportMetric(mean(jpDefault, cpu), "jetplane-cpu-ms/object")
	b.ReportMetric(mean(jpAlways, cpu), "jetplane-sync-always-cpu-ms/object")
	b.ReportMetric(0, "ns/op")
}

// kubeBurstOn starts kube-apiserver on etcd with opts, runs crbench's
// burst of n objects against it and stops kube-apiserver.
func kubeBurstOn(b *testing.B, n int, opts ...kubeenv.Option) kubeBurst {
	env := kubeenv.Start(b, opts...)
	defer env.StopAPIServer(b)
	return runCRBench(b, env.Kubeconfig(), n, env.PIDs()).kubeBurst
}

func msPerObject(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / 1000 / float64(n)
}

// singleClientEnv, when set to "URL N WORKERS", makes
// TestSingleObjectClient the single-object load generator of
// burstSingleChild.
const singleClientEnv = "JETPLANE_BENCH_SINGLE_CLIENT"

// singleClientResult is what the load generator prints: when it sent each
// object (Unix nanoseconds) and the CPU it used sending them.
type singleClientResult struct {
	Sent  map[string]int64 `json:"sent"`
	CPUNs int64            `json:"cpu_ns"`
}

// TestSingleObjectClient is the single-object load generator run as a
// child process by burstSingleChild; without singleClientEnv it does
// nothing.
func TestSingleObjectClient(t *testing.T) {
	spec := os.Getenv(singleClientEnv)
	if spec == "" {
		return
	}
	var url string
	var n, workers int
	if _, err := fmt.Sscan(spec, &url, &n, &workers); err != nil {
		t.Fatalf("%s=%q: %v", singleClientEnv, spec, err)
	}
	cpu0 := cpuTime()
	sent, err := sendSingle(&api.Client{BaseURL: url}, n, workers)
	if err != nil {
		t.Fatal(err)
	}
	res := singleClientResult{Sent: make(map[string]int64, n), CPUNs: int64(cpuTime() - cpu0)}
	for k, at := range sent {
		res.Sent[k] = at.UnixNano()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		t.Fatal(err)
	}
}

// burstSingleChild is burstSingle sent by a child process (this test
// binary again, running TestSingleObjectClient), so that this process's
// CPU time covers jetplane's server (and the benchmark's watcher) alone;
// it returns when each object was sent and the CPU the child used.
func burstSingleChild(b *testing.B, url string, n, workers int) (map[string]time.Time, time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSingleObjectClient$", "-test.count", "1", "-test.v=false")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", singleClientEnv, url, n, workers))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("single-object client: %v\n%s\n%s", err, out, stderr.String())
	}
	// The result is the line of JSON before go test's own "PASS".
	line := out
	if i := bytes.IndexByte(out, '\n'); i >= 0 {
		line = out[:i]
	}
	var res singleClientResult
	if err := json.Unmarshal(line, &res); err != nil {
		b.Fatalf("single-object client printed %q: %v", out, err)
	}
	sent := make(map[string]time.Time, len(res.Sent))
	for k, ns := range res.Sent {
		sent[k] = time.Unix(0, ns)
	}
	return sent, time.Duration(res.CPUNs)
}

// burstSingle applies n objects one a request, workers requests at a
// time, and returns when each was sent.
func burstSingle(b *testing.B, c *api.Client, n, workers int) map[string]time.Time {
	sent, err := sendSingle(c, n, workers)
	if err != nil {
		b.Fatal(err)
	}
	return sent
}

// sendSingle is burstSingle's load: it stops at the first error.
func sendSingle(c *api.Client, n, workers int) (map[string]time.Time, error) {
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	err := testenv.Spread(n, workers, func(i int) error {
		start := time.Now()
		if _, err := c.ApplyBrief(context.Background(), "bench", benchDocs(i, i+1, "1"), ""); err != nil {
			return err
		}
		mu.Lock()
		sent[fmt.Sprint("o-", i)] = start
		mu.Unlock()
		return nil
	})
	return sent, err
}

// latencies is apply → Ready p50 and p99, in milliseconds.
func latencies(sent map[string]time.Time, w *readyAt, n int) (p50, p99 float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for name, at := range w.at {
		lat = append(lat, at.Sub(sent[name]))
	}
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)/2].Seconds() * 1000, lat[len(lat)*99/100].Seconds() * 1000
}
