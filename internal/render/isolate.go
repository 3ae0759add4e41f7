package render

import (
	"bufio"
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
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/jetplane/jetplane/schemas"
)

// Limits of one render. helm's engine builds the results of `include` and
// `tpl` in buffers of its own and Go's templates cannot be interrupted, so
// a chart of a few hundred bytes can double a string into gigabytes. Every
// render therefore runs in a child process (this same executable,
// re-executed) whose memory and time are watched and capped; a chart over
// either is refused with an *Error naming the limit.
const (
	// MaxRenderMemory bounds the memory a render may use beyond what the
	// child process holds once started and given its request.
	MaxRenderMemory = 32 << 20
	// MaxRenderTime bounds a render's wall-clock time, and its CPU time.
	MaxRenderTime = 30 * time.Second
)

// childEnv marks the re-executed render child; its value holds the limits
// ("memory-bytes,cpu-seconds"). It is set only on the child's environment.
const childEnv = "JETPLANE_RENDER_CHILD"

// Exit codes of the child.
const (
	exitOverMemory = 3
	exitBadRequest = 4
)

// renderSlots bounds how many render children run at once: each may use
// up to MaxRenderMemory.
var renderSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// init serves the render child before anything else of the executable
// runs. Every binary that can render links this package, so re-executing
// the running executable lands here, never in its main, its TestMain or
// its tests; ServeChild does the same for a TestMain that wants it said.
func init() { ServeChild() }

// ServeChild, in a render child, renders the request on standard input,
// answers on standard output and exits; elsewhere it returns at once.
func ServeChild() {
	if v, ok := os.LookupEnv(childEnv); ok {
		os.Exit(serveChild(v, os.Stdin, os.Stdout, os.Stderr))
	}
}

// Render renders c with opts in a child process bounded by MaxRenderMemory
// and MaxRenderTime; the chart's lookup calls are answered by opts.Lookup
// in this process. It returns *Error for anything the chart or values are
// to blame for, a limit included, and the same *Error as rendering in
// this process would.
func Render(c *chart.Chart, opts Options) (*Result, error) {
	return renderChild(c, opts, MaxRenderMemory, MaxRenderTime)
}

func renderChild(c *chart.Chart, opts Options, memory int64, timeout time.Duration) (*Result, error) {
	req := newRequest(c, opts)
	renderSlots <- struct{}{}
	defer func() { <-renderSlots }()

	exe, err := executable()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{fmt.Sprintf("%s=%d,%d", childEnv, memory, int(timeout.Seconds())), "GOMAXPROCS=2", "GOTRACEBACK=none"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	stderr := &capped{max: 16 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("render: starting the render process: %w", err)
	}
	p := &parent{ctx: ctx, lookup: opts.Lookup, in: bufio.NewWriter(stdin), out: bufio.NewReader(stdout), budget: memory}
	res, protoErr := p.converse(req)
	if errors.Is(protoErr, errFrameTooLarge) || p.budget < 0 {
		_ = cmd.Process.Kill()
	}
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, stdout) // let the child end before Wait closes the pipe
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the chart took longer than the render time limit (%s)", timeout)}
	case errors.Is(protoErr, errFrameTooLarge) || p.budget < 0:
		return nil, &Error{Reason: fmt.Sprintf("rendering stopped: the rendered release is over the render memory limit (%d MiB)", memory>>20)}
	case protoErr == nil && waitErr == nil:
		return res, nil
	case errors.As(protoErr, new(*Error)) && waitErr == nil:
		return nil, protoErr // the chart's own error
	case protoErr != nil && waitErr == nil:
		return nil, fmt.Errorf("render: reading the render process's answer: %w", protoErr)
	}
	var exit *exec.ExitError
	if !errors.As(waitErr, &exit) {
		return nil, fmt.Errorf("render: the render process: %w", waitErr)
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

// parent is the parent's end of one render child's pipes.
type parent struct {
	ctx    context.Context
	lookup engine.ClientProvider
	in     *bufio.Writer
	out    *bufio.Reader
	// budget is what the child may still send; below zero the answer is
	// over the render memory limit.
	budget int64
}

func (p *parent) read() (byte, []byte, error) {
	kind, b, err := readFrame(p.out, max(p.budget, 0))
	p.budget -= int64(len(b))
	return kind, b, err
}

// converse sends req, answers the child's lookups and reads its result.
func (p *parent) converse(req request) (*Result, error) {
	if err := writeFrame(p.in, frameRequest, req); err != nil {
		return nil, err
	}
	req = request{}
	for {
		kind, b, err := p.read()
		if err != nil {
			return nil, err
		}
		switch kind {
		case frameLookup:
			var call lookupCall
			if err := json.Unmarshal(b, &call); err != nil {
				return nil, err
			}
			if err := writeFrame(p.in, frameAnswer, answerLookup(p.ctx, p.lookup, call)); err != nil {
				return nil, err
			}
		case frameHeader:
			var h header
			if err := json.Unmarshal(b, &h); err != nil {
				return nil, err
			}
			if h.Err != nil {
				return nil, h.Err
			}
			res := h.Result
			if res == nil {
				return nil, errors.New("no result")
			}
			if res.Objects, err = p.objects(h.Objects); err != nil {
				return nil, err
			}
			if res.Hooks, err = p.objects(h.Hooks); err != nil {
				return nil, err
			}
			return res, nil
		default:
			return nil, fmt.Errorf("unexpected frame %q", kind)
		}
	}
}

func (p *parent) objects(n int) ([]Object, error) {
	var objs []Object
	for range n {
		kind, b, err := p.read()
		if err != nil {
			return nil, err
		}
		var w wireObject
		if kind != frameObject {
			return nil, fmt.Errorf("unexpected frame %q", kind)
		}
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, err
		}
		w.Object.Object = &schemas.Object{}
		if err := proto.Unmarshal(w.Proto, w.Object.Object); err != nil {
			return nil, err
		}
		objs = append(objs, w.Object)
	}
	return objs, nil
}

// answerLookup answers one lookup call as helm's lookup function does with
// the same provider in process.
func answerLookup(ctx context.Context, p engine.ClientProvider, call lookupCall) (a lookupAnswer) {
	if p == nil {
		return lookupAnswer{NotFound: true}
	}
	defer func() {
		if r := recover(); r != nil {
			a = lookupAnswer{Err: fmt.Sprint(r)}
		}
	}()
	c, namespaced, err := p.GetClientFor(call.APIVersion, call.Kind)
	if err != nil {
		return lookupAnswer{Err: err.Error()}
	}
	var client dynamic.ResourceInterface = c
	if namespaced && call.Namespace != "" {
		client = c.Namespace(call.Namespace)
	}
	var content map[string]any
	if call.Name != "" {
		var obj *unstructured.Unstructured
		if obj, err = client.Get(ctx, call.Name, metav1.GetOptions{}); err == nil {
			content = obj.UnstructuredContent()
		}
	} else {
		var list *unstructured.UnstructuredList
		if list, err = client.List(ctx, metav1.ListOptions{}); err == nil {
			content = list.UnstructuredContent()
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return lookupAnswer{NotFound: true}
	case err != nil:
		return lookupAnswer{Err: err.Error()}
	}
	return lookupAnswer{Content: encodeValue(content)}
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

// capped is a buffer that keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// serveChild is the render child: it caps itself, reads one request on in
// and writes the result on out, asking for lookups on the way. spec is
// "memory,cpu-seconds".
func serveChild(spec string, stdin io.Reader, stdout, errOut io.Writer) int {
	memS, cpuS, _ := strings.Cut(spec, ",")
	memory, err1 := strconv.ParseInt(memS, 10, 64)
	cpu, err2 := strconv.Atoi(cpuS)
	if err1 != nil || err2 != nil || memory <= 0 || cpu <= 0 {
		fmt.Fprintf(errOut, "render child: bad limits %q\n", spec)
		return exitBadRequest
	}
	if err := limitSelf(memory, cpu); err != nil {
		fmt.Fprintf(errOut, "render child: %v\n", err)
		return exitBadRequest
	}
	in, out := bufio.NewReader(stdin), bufio.NewWriter(stdout)
	kind, b, err := readFrame(in, memory)
	var req request
	if err == nil && kind == frameRequest {
		err = json.Unmarshal(b, &req)
	}
	if err != nil || kind != frameRequest || req.Chart == nil {
		fmt.Fprintf(errOut, "render child: bad request: %v\n", err)
		return exitBadRequest
	}
	b = nil
	c, opts := req.Chart.chart(), req.options()
	req = request{Lookup: req.Lookup}
	if req.Lookup {
		opts.Lookup = childLookup{in: in, out: out}
	}
	// The request is in: from here on the render may hold memory more.
	runtime.GC()
	start := held()
	debug.SetMemoryLimit(int64(start) + memory)
	go watchMemory(start, uint64(memory), errOut)

	res, err := render(c, opts)
	c = nil
	var h header
	switch e := (*Error)(nil); {
	case errors.As(err, &e):
		h.Err = e
	case err != nil:
		h.Err = &Error{Reason: err.Error()}
	default:
		r := *res
		r.Objects, r.Hooks = nil, nil
		h.Result, h.Objects, h.Hooks = &r, len(res.Objects), len(res.Hooks)
	}
	if err := writeFrame(out, frameHeader, h); err != nil {
		fmt.Fprintf(errOut, "render child: %v\n", err)
		return exitBadRequest
	}
	if h.Err != nil {
		return 0
	}
	for _, list := range [][]Object{res.Objects, res.Hooks} {
		for i, o := range list {
			list[i] = Object{} // sent objects are garbage
			b, err := proto.Marshal(o.Object)
			if err == nil {
				o.Object = nil
				err = writeFrame(out, frameObject, wireObject{Object: o, Proto: b})
			}
			if err != nil {
				fmt.Fprintf(errOut, "render child: %v\n", err)
				return exitBadRequest
			}
		}
	}
	return 0
}

// held is the memory the Go runtime holds from the system: heap, garbage
// included, stacks and metadata, less what it returned.
func held() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64() - sample[1].Value.Uint64()
}

// watchMemory ends the child when the memory the Go runtime holds grows
// more than limit beyond start, or its resident anonymous memory (which
// counts what the runtime does not: the race detector's shadow, C
// allocations) grows more than residentFactor times limit, and a full
// collection that returns what it frees to the system does not bring it
// back under: garbage a collector slowed by a busy machine has not yet
// freed does not count. With the Go memory limit set to the same size,
// the collector keeps a render whose live data fits under it; one that
// does not fit ends here, polled each millisecond, or at the kernel's
// limit on its data (limitSelf) when one allocation is larger.
func watchMemory(start, limit uint64, errOut io.Writer) {
	anon0 := residentAnon()
	over := func() string {
		if v := held(); v > start+limit {
			return fmt.Sprintf("%d bytes held, over the limit of %d beyond the %d at start", v, limit, start)
		}
		if a := residentAnon(); a > anon0+residentFactor*limit {
			return fmt.Sprintf("%d bytes resident, over %d times the limit of %d beyond the %d at start", a, residentFactor, limit, anon0)
		}
		return ""
	}
	for {
		if over() != "" {
			debug.FreeOSMemory()
			if why := over(); why != "" {
				fmt.Fprintf(errOut, "render child: %s\n", why)
				os.Exit(exitOverMemory)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// childLookup is the render child's end of the chart's lookup calls: each
// Get or List goes to the parent, which runs it on its own provider. Every
// kind is said to be namespaced, so the namespace the chart gave reaches
// the parent, which decides as helm does.
type childLookup struct {
	in  *bufio.Reader
	out *bufio.Writer
}

func (l childLookup) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return childResource{l: l, call: lookupCall{APIVersion: apiVersion, Kind: kind}}, true, nil
}

func (l childLookup) ask(call lookupCall) (map[string]any, error) {
	if err := writeFrame(l.out, frameLookup, call); err != nil {
		return nil, fmt.Errorf("asking for the lookup: %w", err)
	}
	kind, b, err := readFrame(l.in, 1<<40)
	var a lookupAnswer
	if err == nil && kind == frameAnswer {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lookup's answer: %w", err)
	}
	gv, _ := schema.ParseGroupVersion(call.APIVersion)
	switch {
	case a.NotFound:
		return nil, apierrors.NewNotFound(gv.WithResource(strings.ToLower(call.Kind)).GroupResource(), call.Name)
	case a.Err != "":
		return nil, errors.New(a.Err)
	}
	m, _ := a.Content.decode().(map[string]any)
	return m, nil
}

// childResource is the part of a dynamic client helm's lookup uses.
type childResource struct {
	dynamic.NamespaceableResourceInterface // not called: only lookup's methods are implemented
	l                                      childLookup
	call                                   lookupCall
}

func (r childResource) Namespace(ns string) dynamic.ResourceInterface {
	r.call.Namespace = ns
	return r
}

func (r childResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	r.call.Name = name
	m, err := r.l.ask(r.call)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func (r childResource) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	m, err := r.l.ask(r.call)
	if err != nil {
		return nil, err
	}
	// helm reads the list back with UnstructuredContent: its fields and
	// its items.
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	for k, v := range m {
		if k != "items" {
			list.Object[k] = v
		}
	}
	items, _ := m["items"].([]any)
	for _, it := range items {
		im, _ := it.(map[string]any)
		list.Items = append(list.Items, unstructured.Unstructured{Object: im})
	}
	return list, nil
}
