//go:build unix

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
)

// kubeBurst is what internal/tools/crbench prints.
type kubeBurst struct {
	ObjectsPerS float64 `json:"objects_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	CPUMsPerObj float64 `json:"cpu_ms_per_object"`
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
// module), then jetplane at default durability, then jetplane with
// --sync=always (etcd fsyncs every write before it answers, as in
// production: kubeenv.Fsync; jetplane's default fsyncs on an interval, so
// only the --sync=always figures are at equal durability). It reports
// each one's objects/s, p99 and CPU per object, and jetplane's ratio to
// the Kubernetes stack of the same iteration.
//
// The Kubernetes side creates objects one request each, 16 at a time (it
// has no bulk create). jetplane runs each durability twice: applies of 500
// objects a request, 4 at a time, as its CLI and API clients send them;
// and the single-object form, one object a request, 16 at a time, as the
// Kubernetes side sends them (the API's per-token rate limit off, as the
// Kubernetes client's is). CPU per object covers etcd, kube-apiserver and
// the controller's process, and jetplane's whole process, each with its
// burst's client.
func BenchmarkCompareKube(b *testing.B) {
	const n = 10_000
	bin := crbenchBinary(b)
	var kube, jpDefault, jpAlways, jpSingle, jpSingleAlways []kubeBurst
	for range b.N {
		env := kubeenv.Start(b, kubeenv.Fsync())
		var pids []string
		for _, p := range env.PIDs() {
			pids = append(pids, fmt.Sprint(p))
		}
		cmd := exec.Command(bin, "--kubeconfig-file", env.Kubeconfig(), "--n", fmt.Sprint(n), "--workers", "8", "--pids", strings.Join(pids, ","))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("crbench: %v\n%s", err, stderr.String())
		}
		var k kubeBurst
		if err := json.Unmarshal(out, &k); err != nil {
			b.Fatalf("crbench printed %q: %v", out, err)
		}
		kube = append(kube, k)
		env.StopAPIServer(b)

		for _, single := range []bool{false, true} {
			for _, always := range []bool{false, true} {
				a, c := startApp(b, app.Config{SyncAlways: always, Reconcilers: []reconcilers.Reconciler{benchReconciler()}, Queue: queue.Config{MaxRunning: 8},
					APILimits: api.Limits{Rate: -1}})
				w := watchReady(b, a.Store(), 1, n)
				cpu0, t0 := cpuTime(), time.Now()
				var sent map[string]time.Time
				if single {
					sent = burstSingle(b, c, n, 16)
				} else {
					sent = burst(b, c, n, "1")
				}
				<-w.done
				elapsed, cpu := time.Since(t0), cpuTime()-cpu0
				r := kubeBurst{ObjectsPerS: float64(n) / elapsed.Seconds(), CPUMsPerObj: float64(cpu.Microseconds()) / 1000 / n}
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
	b.ReportMetric(mean(kube, rate), "kube-objects/s")
	b.ReportMetric(mean(jpDefault, rate), "jetplane-objects/s")
	b.ReportMetric(mean(jpAlways, rate), "jetplane-sync-always-objects/s")
	b.ReportMetric(mean(jpDefault, rate)/mean(kube, rate), "ratio-default")
	b.ReportMetric(mean(jpAlways, rate)/mean(kube, rate), "ratio-sync-always")
	b.ReportMetric(mean(jpSingle, rate), "single-jetplane-objects/s")
	b.ReportMetric(mean(jpSingleAlways, rate), "single-jetplane-sync-always-objects/s")
	b.ReportMetric(mean(jpSingle, rate)/mean(kube, rate), "single-ratio-default")
	b.ReportMetric(mean(jpSingleAlways, rate)/mean(kube, rate), "single-ratio-sync-always")
	b.ReportMetric(mean(jpSingle, p99), "single-jetplane-p99-ms")
	b.ReportMetric(mean(jpSingleAlways, p99), "single-jetplane-sync-always-p99-ms")
	b.ReportMetric(mean(jpSingle, cpu), "single-jetplane-cpu-ms/object")
	b.ReportMetric(mean(jpSingleAlways, cpu), "single-jetplane-sync-always-cpu-ms/object")
	b.ReportMetric(mean(kube, p99), "kube-p99-ms")
	b.ReportMetric(mean(jpDefault, p99), "jetplane-p99-ms")
	b.ReportMetric(mean(jpAlways, p99), "jetplane-sync-always-p99-ms")
	b.ReportMetric(mean(kube, cpu), "kube-cpu-ms/object")
	b.ReportMetric(mean(jpDefault, cpu), "jetplane-cpu-ms/object")
	b.ReportMetric(mean(jpAlways, cpu), "jetplane-sync-always-cpu-ms/object")
	b.ReportMetric(0, "ns/op")
}

// burstSingle applies n objects one a request, workers requests at a
// time, and returns when each was sent.
func burstSingle(b *testing.B, c *api.Client, n, workers int) map[string]time.Time {
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				start := time.Now()
				if _, err := c.ApplyBrief(context.Background(), "bench", benchDocs(i, i+1, "1"), ""); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				sent[fmt.Sprint("o-", i)] = start
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sent
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
