package security

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

// renderCeiling is what rendering one chart may cost in memory beyond a
// render of a trivial chart: jetplane's own peak and its render child's,
// together.
const renderCeiling = 100 << 20

// exponentialChart doubles a string once per level of a named template
// that includes itself: 30 levels render 2^30 bytes (1 GiB) from a chart
// of a few hundred bytes.
func exponentialChart() map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: boom\nversion: 0.1.0\n",
		"templates/_x.tpl": `{{- define "x" -}}
{{- if gt (int .) 0 -}}
{{- $s := include "x" (sub . 1) -}}{{ $s }}{{ $s }}
{{- else -}}a{{- end -}}
{{- end -}}`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: boom}\ndata:\n  v: {{ include \"x\" 30 | quote }}\n",
	}
}

// trivial is a chart of one ConfigMap: the baseline of a render.
var trivial = map[string]string{
	"Chart.yaml":        "apiVersion: v2\nname: small\nversion: 0.1.0\n",
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small}\ndata: {v: a}\n",
}

var built struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// jetplaneBinary builds jetplane once per test binary, without the race
// detector, whose shadow memory would be measured too.
func jetplaneBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.bin = filepath.Join(scratch, "jetplane")
		built.out, built.err = exec.Command("go", "build", "-o", built.bin, "../../cmd/jetplane").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// memoryOf samples pid's resident memory and its children's every
// millisecond until stop is closed, and returns the peak of each: the
// process's VmRSS (serve's VmHWM is from its start), and the largest
// private memory of any child.
func memoryOf(pid int, stop <-chan struct{}) <-chan peaks {
	out := make(chan peaks, 1)
	go func() {
		var p peaks
		for {
			p.jetplane = max(p.jetplane, statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")<<10)
			p.child = max(p.child, childMemory(pid))
			select {
			case <-stop:
				out <- p
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return out
}

// TestHelmReleaseExponentialChartBounded runs `jetplane serve` (built
// without the race detector) and applies a HelmRelease of the chart that
// renders 1 GiB: the release turns Failed naming the render memory limit,
// while serve and its render child together hold less than 100 MiB more
// than while a release of a trivial chart renders.
func TestHelmReleaseExponentialChartBounded(t *testing.T) {
	bin := jetplaneBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--listen", addr, "--nats-port", "-1", "--node=false")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := &api.Client{BaseURL: "http://" + addr}
	ctx := context.Background()
	eventually(t, "jetplane serve to answer", func() bool {
		resp, err := http.Get(c.BaseURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	release := func(name string, files map[string]string, phase string) *schemas.Object {
		t.Helper()
		if _, err := c.PushChart(ctx, name, "0.1.0", testenv.Chart(t, files)); err != nil {
			t.Fatalf("push %s: %v", name, err)
		}
		rel := fmt.Sprintf("apiVersion: v1\nkind: HelmRelease\nmetadata: {name: %s, namespace: shop}\nspec:\n  chart: {name: %s, version: 0.1.0}\n  releaseNamespace: shop\n", name, name)
		if _, err := c.Apply(ctx, name+".yaml", []byte(rel), ""); err != nil {
			t.Fatal(err)
		}
		var o *schemas.Object
		deadline := time.Now().Add(2 * time.Minute)
		for {
			raw, err := c.Get(ctx, api.Key{Kind: "HelmRelease", Namespace: "shop", Name: name})
			if err == nil {
				o = &schemas.Object{}
				if err := protojson.Unmarshal(raw, o); err != nil {
					t.Fatal(err)
				}
				if o.GetStatus().GetPhase() == phase {
					return o
				}
			}
			if cmd.ProcessState != nil || time.Now().After(deadline) {
				t.Fatalf("release %s: not %s within 2 minutes: %v %v\n%s", name, phase, err, o.GetStatus(), log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop := make(chan struct{})
	sampled := memoryOf(cmd.Process.Pid, stop)
	release("small", trivial, "Ready")
	close(stop)
	base := <-sampled

	stop = make(chan struct{})
	sampled = memoryOf(cmd.Process.Pid, stop)
	start := time.Now()
	o := release("boom", exponentialChart(), "Failed")
	took := time.Since(start)
	close(stop)
	p := <-sampled
	t.Logf("baseline: serve %d MiB, render child %d MiB; exponential chart: serve %d MiB, render child %d MiB; Failed in %s: %s",
		base.jetplane>>20, base.child>>20, p.jetplane>>20, p.child>>20, took.Round(time.Millisecond), o.GetStatus().GetMessage())
	if !strings.Contains(o.GetStatus().GetMessage(), "rendering stopped: the chart used more than the render memory limit (32 MiB)") {
		t.Fatalf("the release's status %q does not name the render memory limit", o.GetStatus().GetMessage())
	}
	if grown := p.jetplane + p.child - base.jetplane - base.child; grown > renderCeiling {
		t.Fatalf("rendering the chart cost %d MiB beyond the trivial chart's; the ceiling is %d MiB", grown>>20, renderCeiling>>20)
	}
}

// peaks is the most memory a jetplane process and its render children
// held: jetplane's resident memory (VmHWM, its peak since its exec, for
// `jetplane template`), and the largest private memory (RssAnon) of any
// render child. A child's file-backed pages are its executable's, in the
// page cache once for it and jetplane, which runs the same file.
type peaks struct{ jetplane, child int64 }

// childMemory is the most private memory any child of pid holds now.
func childMemory(pid int) int64 {
	var most int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks { // a child belongs to the thread that started it
		kids, _ := os.ReadFile(task)
		for k := range strings.FieldsSeq(string(kids)) {
			most = max(most, statusKB("/proc/"+k+"/status", "RssAnon:")<<10)
		}
	}
	return most
}

// runTemplate runs bin's `jetplane template` on files, sampling the
// memory of it and its children every millisecond; it kills the run when
// the two together pass limit.
func runTemplate(t *testing.T, bin string, files map[string]string, limit int64) (peaks, string, error) {
	t.Helper()
	cmd := exec.Command(bin, "template", "r", testenv.ChartDir(t, files))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var p peaks
	deadline := time.After(2 * time.Minute)
	pid := cmd.Process.Pid
	for {
		select {
		case err := <-done:
			return p, stderr.String(), err
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("jetplane template did not end within 2 minutes")
		case <-time.After(time.Millisecond):
		}
		p.jetplane = max(p.jetplane, statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")<<10)
		p.child = max(p.child, childMemory(pid))
		if p.jetplane+p.child > limit {
			_ = cmd.Process.Kill()
			<-done
			return p, stderr.String(), fmt.Errorf("killed at %d MiB (jetplane %d MiB, render child %d MiB)", (p.jetplane+p.child)>>20, p.jetplane>>20, p.child>>20)
		}
	}
}

// TestRenderExponentialChartBounded runs `jetplane template` (built
// without the race detector, whose shadow memory would be measured too)
// on a chart that renders 1 GiB: it must be refused with an error naming
// the render memory limit while jetplane and its render child together
// hold less than 100 MiB more than they do rendering a trivial chart.
func TestRenderExponentialChartBounded(t *testing.T) {
	files := exponentialChart()
	archive := testenv.Chart(t, files)
	t.Logf("chart: %d bytes packaged", len(archive))
	if len(archive) > 1024 {
		t.Fatalf("the chart is %d bytes; it should stay under 1 KiB", len(archive))
	}
	bin := jetplaneBinary(t)
	base, msg, err := runTemplate(t, bin, trivial, 4<<30)
	if err != nil {
		t.Fatalf("the trivial chart: %v: %s", err, msg)
	}
	baseline := base.jetplane + base.child
	start := time.Now()
	p, msg, err := runTemplate(t, bin, files, baseline+renderCeiling)
	took := time.Since(start)
	t.Logf("baseline: jetplane %d MiB, render child %d MiB; exponential chart: jetplane %d MiB, render child %d MiB, ended in %s: %v: %s",
		base.jetplane>>20, base.child>>20, p.jetplane>>20, p.child>>20, took.Round(time.Millisecond), err, strings.TrimSpace(msg))
	if err == nil {
		t.Fatalf("the exponential chart rendered")
	}
	if p.jetplane == 0 {
		t.Fatalf("jetplane's memory was never sampled")
	}
	if grown := p.jetplane + p.child - baseline; grown > renderCeiling {
		t.Fatalf("rendering the chart cost %d MiB beyond the trivial chart's; the ceiling is %d MiB", grown>>20, renderCeiling>>20)
	}
	if !strings.Contains(msg, "rendering stopped: the chart used more than the render memory limit (32 MiB)") {
		t.Fatalf("the error %q does not name the render memory limit", msg)
	}
}

// statusKB reads a "Name: N kB" line of a /proc status file (0 if absent).
func statusKB(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == name {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
