package security

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/internal/testenv"
)

// renderCeiling is the memory a render may cost: the rendering process's
// peak (this test's own process) and the render child's, each.
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

// The probe: set in the process TestRenderExponentialChartBounded starts,
// which renders the chart and prints its own peak and its children's.
const renderProbeEnv = "JETPLANE_TEST_RENDER_PROBE"

// TestRenderExponentialChartBounded renders the exponential chart in a
// fresh test process (so its peak is the render's alone), sampling that
// process's resident memory and killing it past renderCeiling: the chart
// must be refused with an error naming the limit while neither the
// process nor its render child ever holds 100 MiB.
func TestRenderExponentialChartBounded(t *testing.T) {
	if os.Getenv(renderProbeEnv) != "" {
		renderProbe(t)
		return
	}
	archive := testenv.Chart(t, exponentialChart())
	t.Logf("chart: %d bytes packaged", len(archive))
	if len(archive) > 1024 {
		t.Fatalf("the chart is %d bytes; it should stay under 1 KiB", len(archive))
	}
	dir := t.TempDir()
	path := dir + "/boom.tgz"
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRenderExponentialChartBounded$", "-test.count=1")
	cmd.Env = append(os.Environ(), renderProbeEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	deadline := time.After(2 * time.Minute)
	var waitErr error
sample:
	for {
		select {
		case waitErr = <-done:
			break sample
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the render did not end within 2 minutes; output:\n%s", out.String())
		case <-time.After(2 * time.Millisecond):
		}
		rss := statusKB(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid), "VmRSS:") << 10
		peak = max(peak, rss)
		if rss > renderCeiling {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the rendering process holds %d MiB, over the %d MiB ceiling", rss>>20, renderCeiling>>20)
		}
	}
	t.Logf("probe output:\n%s", out.String())
	if waitErr != nil {
		t.Fatalf("probe: %v", waitErr)
	}
	var self, child int64
	var renderErr string
	for l := range strings.Lines(out.String()) {
		if v, ok := strings.CutPrefix(l, "PEAK "); ok {
			fmt.Sscanf(v, "self=%d child=%d", &self, &child)
		}
		if v, ok := strings.CutPrefix(l, "ERROR "); ok {
			renderErr = strings.TrimSpace(v)
		}
	}
	if self == 0 || child == 0 {
		t.Fatalf("probe reported no peaks")
	}
	t.Logf("peaks: rendering process %d MiB (sampled %d MiB), render child %d MiB", self>>20, peak>>20, child>>20)
	if self > renderCeiling || child > renderCeiling {
		t.Fatalf("peak memory over %d MiB: rendering process %d MiB, render child %d MiB", renderCeiling>>20, self>>20, child>>20)
	}
	if !strings.Contains(renderErr, "render memory limit (32 MiB)") {
		t.Fatalf("render error %q does not name the memory limit", renderErr)
	}
}

// renderProbe renders the chart at $renderProbeEnv and prints the error,
// its own peak resident memory (VmHWM) and its largest child's.
func renderProbe(t *testing.T) {
	archive, err := os.ReadFile(os.Getenv(renderProbeEnv))
	if err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	c, err := render.Load(archive)
	if err != nil {
		t.Fatal(err)
	}
	_, err = render.Render(c, render.Options{ReleaseName: "boom", Namespace: "shop"})
	var rerr *render.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("the exponential chart rendered or failed otherwise: %v", err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ERROR %s\n", rerr)
	fmt.Printf("PEAK self=%d child=%d\n", statusKB("/proc/self/status", "VmHWM:")<<10, ru.Maxrss<<10)
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
