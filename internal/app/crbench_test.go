//go:build unix

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

var (
	sameClientOnce sync.Once
	sameClientBin  string
	sameClientErr  error
)

// crbenchBinary builds internal/tools/crbench (its own module) once per
// test binary.
func crbenchBinary(tb testing.TB) string {
	tb.Helper()
	sameClientOnce.Do(func() {
		dir, err := filepath.Abs(filepath.Join("..", "tools", "crbench"))
		if err != nil {
			sameClientErr = err
			return
		}
		// In the binary's scratch directory, not a test's TempDir:
		// -count runs a benchmark again.
		sameClientBin = filepath.Join(scratch, "crbench")
		if out, err := exec.Command("go", "build", "-C", dir, "-o", sameClientBin, ".").CombinedOutput(); err != nil {
			sameClientErr = fmt.Errorf("go build crbench: %v\n%s", err, out)
		}
	})
	if sameClientErr != nil {
		tb.Fatal(sameClientErr)
	}
	return sameClientBin
}

// crBurst is one crbench run as it printed it: CPU per object over the
// burst (from the first create to the last status write), of the
// servers' processes and the controller's together and apart.
type crBurst struct {
	kubeBurst
	// ServerCPUMs is the CPU per object of the processes pids (etcd and
	// kube-apiserver, or jetplane's).
	ServerCPUMs float64 `json:"server_cpu_ms_per_object"`
	// ControllerCPUMs is the CPU per object of crbench's process.
	ControllerCPUMs float64 `json:"controller_cpu_ms_per_object"`
}

// cores is how many cores the burst kept busy on average: CPU per
// object (servers and controller) times objects per second.
func (r crBurst) cores() float64 { return r.CPUMsPerObj * r.ObjectsPerS / 1000 }

// runCRBench runs the controller-runtime controller of crbench against
// the API server of kubeconfig with a burst of n objects; the CPU of the
// processes pids counts with the controller's own.
func runCRBench(tb testing.TB, kubeconfig string, n int, pids []int) crBurst {
	tb.Helper()
	var ps []string
	for _, p := range pids {
		ps = append(ps, fmt.Sprint(p))
	}
	cmd := exec.Command(crbenchBinary(tb), "--kubeconfig-file", kubeconfig, "--n", fmt.Sprint(n), "--workers", "8",
		"--pids", strings.Join(ps, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("crbench: %v\n%s", err, stderr.String())
	}
	var r crBurst
	if err := json.Unmarshal(out, &r); err != nil {
		tb.Fatalf("crbench printed %q: %v", out, err)
	}
	return r
}

// crbenchJetplane starts jetplane as crbench meets it: HTTPS with a
// bearer token (as kube-apiserver is met), the API's per-token rate
// limit off (the controller's client-side limit is off too), and returns
// a kubeconfig for it.
func crbenchJetplane(tb testing.TB, syncAlways bool) (*app.App, string) {
	tb.Helper()
	a, caPEM := startTLSApp(tb, app.Config{SyncAlways: syncAlways, Tokens: map[string]string{"tok-bench": "bench"},
		APILimits: api.Limits{Rate: -1, Watches: -1}})
	return a, jetplaneKubeconfig(tb, a.URL(), "tok-bench", caPEM)
}

// servesStatus reports whether the server of kubeconfig serves the
// status subresource of crbench's Probe kind, which its controller
// writes. It creates the CustomResourceDefinition first (as crbench does).
func servesStatus(t *testing.T, kubeconfig string) bool {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 30 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd := []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"probes.bench.jetplane.dev"},
"spec":{"group":"bench.jetplane.dev","scope":"Namespaced","names":{"plural":"probes","singular":"probe","kind":"Probe","listKind":"ProbeList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	res := dc.RESTClient().Post().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").
		SetHeader("Content-Type", "application/json").Body(crd).Do(context.Background())
	if err := res.Error(); err != nil {
		t.Fatalf("create the Probe CustomResourceDefinition: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := dc.ServerResourcesForGroupVersion("bench.jetplane.dev/v1")
		if err == nil {
			for _, r := range l.APIResources {
				if r.Name == "probes/status" {
					return true
				}
			}
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("bench.jetplane.dev/v1 not served within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCRBenchAgainstJetplane runs crbench's controller-runtime
// controller, unchanged, against jetplane's Kubernetes API on a short
// burst: it creates its CustomResourceDefinition, lists and watches its
// objects through controller-runtime's cache, creates them, and writes
// each one's status through the status subresource until all are Ready.
// BenchmarkCRBench runs the full burst beside kube-apiserver.
//
// JETPLANE_CRBENCH_N sets the burst's size (default 300): with it the test
// is how jetplane is profiled under the burst (-cpuprofile, -memprofile
// profile this process, which is jetplane's).
func TestCRBenchAgainstJetplane(t *testing.T) {
	n := 300
	if v := os.Getenv("JETPLANE_CRBENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("JETPLANE_CRBENCH_N=%q: want a number of objects", v)
		}
	}
	a, kubeconfig := crbenchJetplane(t, true)
	if !servesStatus(t, kubeconfig) {
		t.Fatal("jetplane does not serve probes/status; crbench's controller writes status through it")
	}
	r := runCRBench(t, kubeconfig, n, []int{os.Getpid()})
	if r.ObjectsPerS <= 0 || r.ServerCPUMs <= 0 || r.ControllerCPUMs <= 0 {
		t.Fatalf("crbench reported %+v", r)
	}
	// The parts are of the same burst as the total.
	if d := r.ServerCPUMs + r.ControllerCPUMs - r.CPUMsPerObj; d > 0.01 || d < -0.01 {
		t.Fatalf("crbench's parts %.3f + %.3f ms are not its total %.3f ms", r.ServerCPUMs, r.ControllerCPUMs, r.CPUMsPerObj)
	}
	if got := a.Store().Len(); got < n {
		t.Fatalf("jetplane holds %d objects after crbench's %d", got, n)
	}
	groups, grouped := a.Log().Groups()
	syncs, waits := a.Log().Syncs()
	t.Logf("crbench against jetplane (--sync=always), %d objects: %.0f objects/s, p99 %.0f ms; CPU per object: jetplane %.2f ms, controller %.2f ms (burst, both: %.2f ms, %.2f cores); %d groups of %d entries; %d fsyncs for %d writes",
		n, r.ObjectsPerS, r.P99Ms, r.ServerCPUMs, r.ControllerCPUMs, r.CPUMsPerObj, r.cores(), groups, grouped, syncs, waits)
}

// BenchmarkCRBench runs crbench's controller-runtime controller, the same
// binary with the same arguments, against kube-apiserver + etcd and
// against jetplane with --sync=always in each iteration (etcd fsyncs
// every write before it answers: kubeenv.Fsync; the test environment's
// etcd does not by default): a burst of 10,000 objects created one a
// request, 16 at a time, each read from the controller's cache and
// written Ready through the status subresource by 8 workers. Both servers
// are met over HTTPS with a bearer token. CPU per object covers etcd,
// kube-apiserver and the controller on one side, jetplane's process (this
// one) and the controller on the other. It reports each side's objects/s,
// p99 and CPU per object, and jetplane's ratios to the Kubernetes stack of
// the same iteration (the medians come from -count).
func BenchmarkCRBench(b *testing.B) {
	const n = 10_000
	var kube, jet []crBurst
	for range b.N {
		env := kubeenv.Start(b, kubeenv.Fsync())
		kube = append(kube, runCRBench(b, env.Kubeconfig(), n, env.PIDs()))
		env.StopAPIServer(b)

		_, kubeconfig := crbenchJetplane(b, true)
		jet = append(jet, runCRBench(b, kubeconfig, n, []int{os.Getpid()}))
	}
	mean := func(rs []crBurst, f func(crBurst) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	rate := func(r crBurst) float64 { return r.ObjectsPerS }
	p99 := func(r crBurst) float64 { return r.P99Ms }
	cpu := func(r crBurst) float64 { return r.CPUMsPerObj }
	server := func(r crBurst) float64 { return r.ServerCPUMs }
	controller := func(r crBurst) float64 { return r.ControllerCPUMs }
	// Each side's CPU apart: the servers (etcd + kube-apiserver, or
	// jetplane) and the controller, over the controller's whole run; and
	// the cores each burst kept busy (under 2 on two cores: it waited).
	b.ReportMetric(mean(kube, server), "kube-server-cpu-ms/object")
	b.ReportMetric(mean(kube, controller), "kube-controller-cpu-ms/object")
	b.ReportMetric(mean(jet, server), "jetplane-server-cpu-ms/object")
	b.ReportMetric(mean(jet, controller), "jetplane-controller-cpu-ms/object")
	b.ReportMetric(mean(jet, server)/mean(kube, server), "ratio-server-cpu/object")
	b.ReportMetric(mean(kube, crBurst.cores), "kube-cores")
	b.ReportMetric(mean(jet, crBurst.cores), "jetplane-cores")
	b.ReportMetric(mean(kube, rate), "kube-objects/s")
	b.ReportMetric(mean(jet, rate), "jetplane-objects/s")
	b.ReportMetric(mean(jet, rate)/mean(kube, rate), "ratio-objects/s")
	b.ReportMetric(mean(kube, p99), "kube-p99-ms")
	b.ReportMetric(mean(jet, p99), "jetplane-p99-ms")
	b.ReportMetric(mean(kube, cpu), "kube-cpu-ms/object")
	b.ReportMetric(mean(jet, cpu), "jetplane-cpu-ms/object")
	b.ReportMetric(mean(jet, cpu)/mean(kube, cpu), "ratio-cpu/object")
	b.ReportMetric(0, "ns/op")
}
