package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/jetplane/jetplane/schemas"
)

// Limits of one render. helm's engine builds the results of `include` and
// `tpl` in buffers of its own and Go's templates cannot be interrupted, so
// a chart of a few hundred bytes can double a string into gigabytes. Every
// render therefore runs in a child process (this same executable,
// re-executed) whose memory and time are capped by the kernel and a
// watchdog; a chart over either is refused with an *Error naming the limit.
const (
	// MaxRenderMemory bounds the memory a render may use beyond what the
	// child process needs to start: its Go heap (GOMEMLIMIT and a
	// watchdog) and its writable memory (RLIMIT_DATA).
	MaxRenderMemory = 32 << 20
	// MaxRenderTime bounds a render's wall-clock time, and its CPU time
	// (RLIMIT_CPU).
	MaxRenderTime = 30 * time.Second
)

// childEnv marks the re-executed render child; its value holds the limits
// ("memory-bytes,cpu-seconds"). It is set only on the child's environment.
const childEnv = "JETPLANE_RENDER_CHILD"

// Exit codes of the child that the parent reads as limits.
const (
	exitOverMemory = 3
	exitBadRequest = 4
)

// renderSlots bounds how many render children run at once: each may use
// up to MaxRenderMemory.
var renderSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// In the child, dispatch before anything else runs: init runs in every
// binary that can render (jetplane, its tests), so re-executing the
// running executable always lands here and never in its main or its tests.
func init() {
	if v, ok := os.LookupEnv(childEnv); ok {
		os.Exit(serveChild(v, os.Stdin, os.Stdout, os.Stderr))
	}
}

type request struct {
	Chart   *wireChart
	Options Options
}

type wireChart struct {
	Metadata  *chart.Metadata
	Lock      *chart.Lock
	Templates []*chart.File
	Values    map[string]any
	Schema    []byte
	Files     []*chart.File
	Deps      []*wireChart
}

// The child answers a header, then Objects objects, each a JSON value of
// its own, so it never holds the whole answer encoded.
type header struct {
	Err         *Error
	Objects     int
	Unsupported []string
	Notes       string
}

type wireObject struct {
	Template string
	Line     int
	Object   []byte // protobuf
	Manifest map[string]any
}

func toWire(c *chart.Chart) *wireChart {
	w := &wireChart{Metadata: c.Metadata, Lock: c.Lock, Templates: c.Templates, Values: c.Values, Schema: c.Schema, Files: c.Files}
	for _, d := range c.Dependencies() {
		w.Deps = append(w.Deps, toWire(d))
	}
	return w
}

func fromWire(w *wireChart) *chart.Chart {
	c := &chart.Chart{Metadata: w.Metadata, Lock: w.Lock, Templates: w.Templates, Values: w.Values, Schema: w.Schema, Files: w.Files}
	for _, d := range w.Deps {
		c.AddDependency(fromWire(d))
	}
	return c
}

// Render renders c with opts in a child process bounded by MaxRenderMemory
// and MaxRenderTime. It returns *Error for anything the chart or values
// are to blame for, a limit included. Values cross to the child as JSON:
// numbers are float64 there, as in values read from YAML.
func Render(c *chart.Chart, opts Options) (*Result, error) {
	req, err := json.Marshal(request{Chart: toWire(c), Options: opts})
	if err != nil {
		return nil, &Error{Template: "values", Reason: err.Error()}
	}
	renderSlots <- struct{}{}
	defer func() { <-renderSlots }()
	out, err := runChild(req, MaxRenderMemory, MaxRenderTime)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var h header
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("render: reading the render process's answer: %w", err)
	}
	if h.Err != nil {
		return nil, h.Err
	}
	res := &Result{Unsupported: h.Unsupported, Notes: h.Notes, Objects: make([]Object, 0, h.Objects)}
	for range h.Objects {
		var o wireObject
		obj := &schemas.Object{}
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("render: reading the render process's answer: %w", err)
		}
		if err := proto.Unmarshal(o.Object, obj); err != nil {
			return nil, fmt.Errorf("render: reading the render process's answer: %w", err)
		}
		res.Objects = append(res.Objects, Object{Template: o.Template, Line: o.Line, Object: obj, Manifest: o.Manifest})
	}
	return res, nil
}

// runChild runs one render child on req and returns its standard output,
// or an *Error naming the limit it went over.
func runChild(req []byte, memory int64, timeout time.Duration) ([]byte, error) {
	exe, err := executable()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{fmt.Sprintf("%s=%d,%d", childEnv, memory, int(timeout.Seconds())), "GOMAXPROCS=2", "GOTRACEBACK=none"}
	cmd.Stdin = bytes.NewReader(req)
	stdout := &capped{max: memory}
	stderr := &capped{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = childAttr()
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the chart took longer than the render time limit (%s)", timeout)}
	}
	if stdout.over {
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the rendered release is over the render memory limit (%d MiB)", memory>>20)}
	}
	if runErr == nil {
		return stdout.Bytes(), nil
	}
	var exit *exec.ExitError
	if !errors.As(runErr, &exit) {
		return nil, fmt.Errorf("render: starting the render process: %w", runErr)
	}
	msg := stderr.String()
	switch {
	case exit.ExitCode() == exitOverMemory, overMemory(msg):
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the chart used more than the render memory limit (%d MiB)", memory>>20)}
	case cpuExceeded(exit):
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the chart used more than the render CPU limit (%s)", timeout)}
	}
	if len(msg) > 512 {
		msg = msg[:512]
	}
	return nil, fmt.Errorf("render: the render process failed (%s): %s", exit, strings.TrimSpace(msg))
}

// overMemory reads the child's last words for an allocation that a limit
// refused: the Go runtime's, the C library's (a thread's stack) and the
// race detector's.
func overMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "pthread_create failed", "failed to allocate"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// capped is a buffer that keeps at most max bytes and notes the excess.
type capped struct {
	bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if int64(c.Len()+len(p)) > c.max {
		c.over = true
		return 0, errors.New("over the limit")
	}
	return c.Buffer.Write(p)
}

// serveChild is the render child: it caps itself, reads one request on
// stdin and writes one response on stdout. spec is "memory,cpu-seconds".
func serveChild(spec string, in io.Reader, out, errOut io.Writer) int {
	memS, cpuS, _ := strings.Cut(spec, ",")
	memory, err1 := strconv.ParseInt(memS, 10, 64)
	cpu, err2 := strconv.Atoi(cpuS)
	if err1 != nil || err2 != nil || memory <= 0 || cpu <= 0 {
		fmt.Fprintf(errOut, "render child: bad limits %q\n", spec)
		return exitBadRequest
	}
	debug.SetMemoryLimit(memory)
	if err := limitSelf(memory, cpu); err != nil {
		fmt.Fprintf(errOut, "render child: %v\n", err)
		return exitBadRequest
	}
	go watchMemory(uint64(memory), errOut)
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil || req.Chart == nil {
		fmt.Fprintf(errOut, "render child: bad request: %v\n", err)
		return exitBadRequest
	}
	c := fromWire(req.Chart)
	req.Chart = nil
	res, err := render(c, req.Options)
	c = nil
	enc := json.NewEncoder(out)
	var h header
	switch e := (*Error)(nil); {
	case errors.As(err, &e):
		h.Err = e
	case err != nil:
		h.Err = &Error{Reason: err.Error()}
	default:
		h.Objects, h.Unsupported, h.Notes = len(res.Objects), res.Unsupported, res.Notes
	}
	if err := enc.Encode(h); err != nil {
		fmt.Fprintf(errOut, "render child: %v\n", err)
		return exitBadRequest
	}
	for i := range h.Objects {
		o := res.Objects[i]
		res.Objects[i] = Object{} // encoded objects are garbage
		b, err := proto.Marshal(o.Object)
		if err == nil {
			err = enc.Encode(wireObject{Template: o.Template, Line: o.Line, Object: b, Manifest: o.Manifest})
		}
		if err != nil {
			fmt.Fprintf(errOut, "render child: %v\n", err)
			return exitBadRequest
		}
	}
	return 0
}

// watchMemory ends the child when the memory the Go runtime holds from
// the system (heap, garbage included, stacks and metadata, less what it
// returned) grows more than limit beyond what it held at start. With the
// Go memory limit set to the same size, the collector keeps a render whose
// live data fits under it; one that does not fit ends here, polled each
// millisecond on a thread of its own, before the pages of a large
// allocation are written.
func watchMemory(limit uint64, errOut io.Writer) {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	held := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64() - sample[1].Value.Uint64()
	}
	start := held()
	for {
		if v := held(); v > start+limit {
			fmt.Fprintf(errOut, "render child: %d bytes held, over the limit of %d beyond the %d at start\n", v, limit, start)
			os.Exit(exitOverMemory)
		}
		time.Sleep(time.Millisecond)
	}
}
