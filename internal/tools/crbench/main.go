// Command crbench is the Kubernetes side of `scripts/bench compare`: a
// controller-runtime controller with 8 workers against a real
// kube-apiserver and etcd, measured on the same burst jetplane's
// BenchmarkReconcile runs. It creates a CustomResourceDefinition (Probe,
// with a status subresource), then creates n objects as fast as the
// apiserver answers (client-side rate limits off, several creators at
// once); the controller reads each object it is handed and writes its
// status Ready with observedGeneration, as jetplane's benchmark reconciler
// does. It prints one JSON line: objects/s from the first create to the
// last status write, create → status p50 and p99, and CPU per object
// across this process and the pids given (etcd and kube-apiserver).
//
// It is its own module so that controller-runtime never enters jetplane's
// go.mod.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var gvk = schema.GroupVersionKind{Group: "bench.jetplane.dev", Version: "v1", Kind: "Probe"}

const namespace = "default"

type result struct {
	Objects     int     `json:"objects"`
	ObjectsPerS float64 `json:"objects_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	CPUMsPerObj float64 `json:"cpu_ms_per_object"`
	// The same CPU apart: the processes of --pids (the servers) and
	// this controller's own.
	ServerCPUMsPerObj     float64 `json:"server_cpu_ms_per_object"`
	ControllerCPUMsPerObj float64 `json:"controller_cpu_ms_per_object"`
	Workers               int     `json:"workers"`
	Creators              int     `json:"creators"`
	StatusWrites          int64   `json:"status_writes"`
}

func main() {
	kubeconfig := flag.String("kubeconfig-file", "", "kubeconfig of the apiserver (controller-runtime owns --kubeconfig)")
	n := flag.Int("n", 10000, "objects in the burst")
	workers := flag.Int("workers", 8, "controller workers (MaxConcurrentReconciles)")
	creators := flag.Int("creators", 16, "create requests in flight")
	pids := flag.String("pids", "", "other processes whose CPU time counts (comma-separated)")
	flag.Parse()
	log.SetLogger(logr.Discard())
	if err := run(*kubeconfig, *n, *workers, *creators, *pids); err != nil {
		fmt.Fprintln(os.Stderr, "crbench:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, n, workers, creators int, pidList string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := ensureCRD(ctx, c); err != nil {
		return err
	}

	var mu sync.Mutex
	sent := make(map[string]time.Time, n)
	done := make(map[string]time.Time, n)
	all := make(chan struct{})
	var writes int64

	// Reads come from the informer cache, as a typed controller's do
	// (controller-runtime reads unstructured objects live unless told).
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, o); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		gen := o.GetGeneration()
		if og, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration"); og == gen {
			return reconcile.Result{}, nil
		}
		status := map[string]any{
			"observedGeneration": gen,
			"phase":              "Ready",
			"conditions": []any{map[string]any{
				"type": "Ready", "status": "True", "reason": "Reconciled",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			}},
		}
		if err := unstructured.SetNestedField(o.Object, status, "status"); err != nil {
			return reconcile.Result{}, err
		}
		if err := mgr.GetClient().Status().Update(ctx, o); err != nil {
			return reconcile.Result{}, err // a conflict re-runs against fresh state
		}
		mu.Lock()
		writes++
		if _, seen := done[req.Name]; !seen {
			done[req.Name] = time.Now()
			if len(done) == n {
				close(all)
			}
		}
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	if err := ctrl.NewControllerManagedBy(mgr).For(obj).Named("probe").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).Complete(r); err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}

	others := parsePIDs(pidList)
	self0, others0, t0 := selfCPU(), pidsCPU(others), time.Now()
	jobs := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				name := fmt.Sprint("o-", i)
				o := &unstructured.Unstructured{}
				o.SetGroupVersionKind(gvk)
				o.SetNamespace(namespace)
				o.SetName(name)
				_ = unstructured.SetNestedField(o.Object, map[string]any{"size": int64(1)}, "spec")
				start := time.Now()
				mu.Lock()
				sent[name] = start
				mu.Unlock()
				if err := c.Create(ctx, o); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	select {
	case <-all:
	case err := <-mgrDone:
		return fmt.Errorf("manager stopped: %v", err)
	case <-time.After(30 * time.Minute):
		return fmt.Errorf("only %d of %d objects reconciled in 30 minutes", len(done), n)
	}
	elapsed, self, servers := time.Since(t0), selfCPU()-self0, pidsCPU(others)-others0
	mu.Lock()
	lat := make([]time.Duration, 0, n)
	for name, at := range done {
		lat = append(lat, at.Sub(sent[name]))
	}
	mu.Unlock()
	slices.Sort(lat)
	res := result{
		Objects: n, ObjectsPerS: float64(n) / elapsed.Seconds(),
		P50Ms: ms(lat[n/2]), P99Ms: ms(lat[n*99/100]),
		CPUMsPerObj:       perObject(self+servers, n),
		ServerCPUMsPerObj: perObject(servers, n), ControllerCPUMsPerObj: perObject(self, n),
		Workers: workers, Creators: creators, StatusWrites: writes,
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

func perObject(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }

// ensureCRD creates the Probe CustomResourceDefinition and waits until it
// is served.
func ensureCRD(ctx context.Context, c client.Client) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "probes.bench.jetplane.dev"},
		"spec": map[string]any{
			"group": "bench.jetplane.dev",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "probes", "singular": "probe", "kind": "Probe", "listKind": "ProbeList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind("ProbeList"))
		err := c.List(ctx, l, client.InNamespace(namespace))
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD not served after a minute: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func parsePIDs(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if p, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidsCPU is the user+system CPU time of the processes pids, read from
// /proc.
func pidsCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces): utime is
		// the 14th field, stime the 15th, in clock ticks (100 per second).
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}
