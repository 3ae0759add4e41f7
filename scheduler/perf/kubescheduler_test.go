//go:build linux

package perf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// BenchmarkKubeScheduler measures kube-scheduler v1.36.3 (built from
// source by internal/tools/kubeschedbin) on the same fake cluster as
// BenchmarkScheduling: the nodes and -sched.pods pending pods are created
// in the test kube-apiserver first, then kube-scheduler starts with its
// default plugins, and pods/s runs from the first binding seen to the last
// (its start-up and informer sync are not counted); cpu-µs/pod is
// kube-scheduler's own CPU time over the same span (its apiserver and etcd
// are not counted, where BenchmarkScheduling's figure counts jetplane's log
// and projection). Run it with -benchtime=1x: each run needs a fresh
// apiserver.
func BenchmarkKubeScheduler(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchKubeScheduler(b, nodes, *benchPods) })
	}
}

func benchKubeScheduler(b *testing.B, nodes, pods int) {
	b.StopTimer()
	bin, err := kubeenv.KubeScheduler(context.Background(), b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	var rate, cpu float64
	for i := 0; i < b.N; i++ {
		r, c := kubeRun(b, bin, nodes, pods)
		rate += r
		cpu += c
	}
	b.ReportMetric(rate/float64(b.N), "pods/s")
	b.ReportMetric(cpu/float64(b.N), "cpu-µs/pod")
}

// kubeRun returns pods/s and kube-scheduler's own CPU time per pod over
// the same span (its apiserver and etcd not counted).
func kubeRun(b *testing.B, bin string, nodes, pods int) (float64, float64) {
	env := kubeenv.Start(b)
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ns := "bench"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	parallel(b, nodes, func(i int) error {
		name := fmt.Sprintf("node-%05d", i)
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%10)}},
			Status: v1.NodeStatus{
				Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if len(created.Status.Allocatable) == 0 {
			created.Status = n.Status
			if created, err = cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		// The apiserver's admission taints new nodes not-ready until a
		// node lifecycle controller clears it; there is none here.
		if len(created.Spec.Taints) > 0 {
			created.Spec.Taints = nil
			_, err = cs.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{})
		}
		return err
	})
	parallel(b, pods, func(i int) error {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: ns},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "pause",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}}}}}}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})

	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rv := list.ResourceVersion
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { w.Stop() }()

	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
`, env.Kubeconfig())), 0o644); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "kube-scheduler.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config="+cfg, "--secure-port=0", "--v=0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()

	bound := map[string]bool{}
	var first, last time.Time
	var cpuFirst, cpuLast time.Duration
	deadline := time.After(15 * time.Minute)
	for len(bound) < pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The apiserver ends watches now and then: resume.
				if w, err = cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err != nil {
					b.Fatalf("watch again after %d of %d bindings: %v", len(bound), pods, err)
				}
				continue
			}
			if ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if p.Spec.NodeName == "" || bound[p.Name] {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first, cpuFirst = now, processCPU(cmd.Process.Pid)
			}
			last = now
			bound[p.Name] = true
			if len(bound) == pods {
				cpuLast = processCPU(cmd.Process.Pid)
			}
		case <-deadline:
			tail, _ := os.ReadFile(logf.Name())
			b.Fatalf("%d of %d pods bound in 15 minutes; kube-scheduler log:\n%s", len(bound), pods, lastLines(string(tail), 30))
		}
	}
	return float64(pods-1) / last.Sub(first).Seconds(), float64((cpuLast - cpuFirst).Microseconds()) / float64(pods-1)
}

// processCPU is the CPU time (user and system) process pid has used, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s, which
// Linux fixes for this interface); 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is parenthesized and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// parallel runs fn(0..n-1) on 32 goroutines.
func parallel(b *testing.B, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
