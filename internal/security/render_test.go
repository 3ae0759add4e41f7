package security

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/testenv"
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

// peaks is the most memory a `jetplane template` run and its render
// children held, each process's VmHWM (its peak resident memory since
// its exec).
type peaks struct{ jetplane, child int64 }

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
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, task := range tasks { // a child belongs to the thread that started it
			kids, _ := os.ReadFile(task)
			for k := range strings.FieldsSeq(string(kids)) {
				p.child = max(p.child, statusKB("/proc/"+k+"/status", "VmHWM:")<<10)
			}
		}
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
	bin := filepath.Join(t.TempDir(), "jetplane")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/jetplane").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	trivial := map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: small\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small}\ndata: {v: a}\n",
	}
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
