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

// renderCeiling is the memory a render may cost: the rendering process's
// peak and the render child's, each.
const renderCeiling = 100 << 20

// exponentialChart doubles a string once per level of a named template that
// includes itself: 28 levels render 2^28 bytes (256 MiB) from a chart of a
// few hundred bytes.
func exponentialChart() map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: boom\nversion: 0.1.0\n",
		"templates/_x.tpl": `{{- define "x" -}}
{{- if gt (int .) 0 -}}
{{- $s := include "x" (sub . 1) -}}{{ $s }}{{ $s }}
{{- else -}}a{{- end -}}
{{- end -}}`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: boom}\ndata:\n  v: {{ include \"x\" 28 | quote }}\n",
	}
}

// TestRenderExponentialChartBounded runs `jetplane template` (built
// without the race detector, whose shadow memory would be measured too)
// on the exponential chart, sampling its resident memory and killing it
// past renderCeiling: the chart must be refused with an error naming the
// limit while neither jetplane nor its render child ever holds 100 MiB.
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
	cmd := exec.Command(bin, "template", "boom", testenv.ChartDir(t, files))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// VmHWM is the peak of a process's own memory since its exec (wait4's
	// maxrss would count this test's memory, shared until the exec).
	var self, child int64
	deadline := time.After(2 * time.Minute)
	var waitErr error
	pid := cmd.Process.Pid
sample:
	for {
		select {
		case waitErr = <-done:
			break sample
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the render did not end within 2 minutes")
		case <-time.After(time.Millisecond):
		}
		self = max(self, statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")<<10)
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, task := range tasks { // a child belongs to the thread that started it
			kids, _ := os.ReadFile(task)
			for k := range strings.FieldsSeq(string(kids)) {
				child = max(child, statusKB("/proc/"+k+"/status", "VmHWM:")<<10)
			}
		}
		if self > renderCeiling || child > renderCeiling {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("over the %d MiB ceiling while rendering: jetplane %d MiB, render child %d MiB", renderCeiling>>20, self>>20, child>>20)
		}
	}
	took := time.Since(start)
	if waitErr == nil {
		t.Fatalf("the exponential chart rendered (%d bytes of output)", stdout.Len())
	}
	if self == 0 || child == 0 {
		t.Fatalf("no render child seen (jetplane %d MiB)", self>>20)
	}
	t.Logf("refused in %s: %s; peaks: jetplane %d MiB, render child %d MiB", took.Round(time.Millisecond), strings.TrimSpace(stderr.String()), self>>20, child>>20)
	if !strings.Contains(stderr.String(), "render memory limit (32 MiB)") {
		t.Fatalf("the error %q does not name the memory limit", stderr.String())
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
