// Package wasm runs scheduler plugins compiled to WebAssembly (with the
// SDK in scheduler/guest, or any guest of the kube-scheduler-wasm-extension
// ABI shape) inside the scheduler, on wazero. It owns the host side of the
// ABI: host modules k8s.io/api (pod, nodeInfo/node) and k8s.io/scheduler
// (status_reason, get_config), the guest exports filter and score, and
// jetplane's addition, a context area the host writes before each call so
// that the guest decodes the pod once per cycle and each node once per
// revision (decision 0018).
//
// A module is compiled once (with an on-disk compilation cache) and runs in
// a pool of instances; each call has a time budget and each instance a
// memory limit. A guest that traps, loops or exhausts its memory fails
// that call with the reason, its instance is thrown away, and the next
// call gets a fresh one. Nothing else in jetplane imports wazero.
package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	v1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/scheduler"
)

// Args are a WebAssembly plugin's pluginConfig args.
type Args struct {
	// GuestPath is the module file; Image, in its place, a module in
	// jetplane's image store: NAME:TAG or NAME@sha256:<hex> (the plugin
	// must come from RegistryWithImages).
	GuestPath string `json:"guestPath,omitempty"`
	Image     string `json:"image,omitempty"`
	// GuestConfig is handed to the guest by get_config.
	GuestConfig string `json:"guestConfig,omitempty"`
	// Timeout bounds one call (default 1s).
	Timeout string `json:"timeout,omitempty"`
	// MemoryLimitPages bounds an instance's memory in 64 KiB pages
	// (default 2048: 128 MiB).
	MemoryLimitPages uint32 `json:"memoryLimitPages,omitempty"`
	// CacheDir holds compiled modules (default: the user cache dir).
	CacheDir string `json:"cacheDir,omitempty"`
}

// Factory builds WebAssembly plugins for a scheduler.Registry: register it
// under scheduler.WasmPlugin.
func Factory(name string, raw json.RawMessage) (scheduler.Plugin, error) {
	var a Args
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return Load(context.Background(), name, a)
}

// Registry is the default registry with WebAssembly plugins.
func Registry() scheduler.Registry {
	r := scheduler.DefaultRegistry()
	r[scheduler.WasmPlugin] = Factory
	return r
}

// ImageSource is where plugins with an image come from: jetplane's image
// store (*events.Images).
type ImageSource interface {
	Resolve(ctx context.Context, ref string) (digest string, size uint64, err error)
	Fetch(ctx context.Context, digest string, w io.Writer, max int64) error
}

var _ ImageSource = (*events.Images)(nil)

// RegistryWithImages is Registry with plugins that may name an image in
// images instead of a file.
func RegistryWithImages(images ImageSource) scheduler.Registry {
	r := scheduler.DefaultRegistry()
	r[scheduler.WasmPlugin] = func(name string, raw json.RawMessage) (scheduler.Plugin, error) {
		var a Args
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("args: %w", err)
		}
		return LoadFrom(context.Background(), name, a, images)
	}
	return r
}

// Plugin is one loaded module. Close releases it.
type Plugin struct {
	name    string
	version string
	config  []byte
	timeout time.Duration

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	hasFilt  bool
	hasScore bool
	// hasArea: the guest exports jetplane_area (built with
	// scheduler/guest); without it the guest fetches the pod and node on
	// every call, as the extension's guests do. filtBatch and scoreBatch:
	// it exports jetplane_filter_nodes / jetplane_score_nodes
	// (decision 0031).
	hasArea               bool
	filtBatch, scoreBatch bool

	pool    chan *instance
	mu      sync.Mutex
	all     map[*instance]struct{}
	seq     atomic.Uint64
	closed  chan struct{}
	stopped sync.WaitGroup

	// podFetches and nodeFetches count the guest's pod and node host
	// calls (how often it had to decode).
	podFetches, nodeFetches atomic.Uint64

	nodesMu sync.RWMutex
	nodes   map[string]*encodedNode
	slots   map[string]uint64
}

type encodedNode struct {
	rev  uint64
	slot uint64
	data []byte
}

// Load compiles the module at a.GuestPath (Args.Image needs LoadFrom) and returns the plugin; its
// type implements Filter and/or Score as the guest exports them.
func Load(ctx context.Context, name string, a Args) (scheduler.Plugin, error) {
	return LoadFrom(ctx, name, a, nil)
}

// LoadFrom is Load with an image store for Args.Image.
func LoadFrom(ctx context.Context, name string, a Args, images ImageSource) (scheduler.Plugin, error) {
	p, err := load(ctx, name, a, images)
	if err != nil {
		return nil, err
	}
	switch {
	case p.hasFilt && p.hasScore:
		return filterScore{p}, nil
	case p.hasFilt:
		return filterOnly{p}, nil
	case p.hasScore:
		return scoreOnly{p}, nil
	}
	p.Close()
	return nil, fmt.Errorf("wasm plugin %s: %s exports neither filter nor score", name, a.GuestPath+a.Image)
}

// module reads the guest's code from its file or the image store; an
// image's bytes must match the digest its ref resolved to.
func module(ctx context.Context, a Args, images ImageSource) ([]byte, error) {
	switch {
	case (a.GuestPath == "") == (a.Image == ""):
		return nil, errors.New("exactly one of guestPath and image is required")
	case a.GuestPath != "":
		code, err := os.ReadFile(a.GuestPath)
		if err != nil {
			return nil, fmt.Errorf("guestPath: %w", err)
		}
		return code, nil
	case images == nil:
		return nil, fmt.Errorf("image %s: this scheduler has no image store", a.Image)
	}
	digest, _, err := images.Resolve(ctx, a.Image)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := images.Fetch(ctx, digest, &buf, events.DefaultMaxImageBytes); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("image %s: the stored module's digest is %s, not %s", a.Image, got, digest)
	}
	return buf.Bytes(), nil
}

func load(ctx context.Context, name string, a Args, images ImageSource) (*Plugin, error) {
	code, err := module(ctx, a, images)
	if err != nil {
		return nil, fmt.Errorf("wasm plugin %s: %w", name, err)
	}
	timeout := time.Second
	if a.Timeout != "" {
		if timeout, err = time.ParseDuration(a.Timeout); err != nil || timeout <= 0 {
			return nil, fmt.Errorf("timeout: %q is not a positive duration", a.Timeout)
		}
	}
	pages := a.MemoryLimitPages
	if pages == 0 {
		pages = 2048
	}
	dir := a.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "jetplane", "wasm")
	}
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	// No WithCloseOnContextDone: the module carries its own stop checks.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(cache).WithMemoryLimitPages(pages))
	sum := sha256.Sum256(code)
	instrumented, err := instrument(code)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: %s: %w", name, a.GuestPath+a.Image, err)
	}
	p := &Plugin{name: name, version: "wasm/sha256:" + hex.EncodeToString(sum[:8]), config: []byte(a.GuestConfig),
		timeout: timeout, rt: rt, pool: make(chan *instance, 64), all: map[*instance]struct{}{}, closed: make(chan struct{}),
		nodes: map[string]*encodedNode{}, slots: map[string]uint64{}}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	if err := p.hostModules(ctx); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	if p.compiled, err = rt.CompileModule(ctx, instrumented); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: compile %s: %w", name, a.GuestPath+a.Image, err)
	}
	exports := p.compiled.ExportedFunctions()
	_, p.hasFilt = exports["filter"]
	_, p.hasScore = exports["score"]
	_, p.hasArea = exports["jetplane_area"]
	_, hasBatch := exports["jetplane_batch_area"]
	_, p.filtBatch = exports["jetplane_filter_nodes"]
	_, p.scoreBatch = exports["jetplane_score_nodes"]
	p.filtBatch = p.filtBatch && hasBatch && p.hasArea
	p.scoreBatch = p.scoreBatch && hasBatch && p.hasArea
	// Instantiate one now so that a module that cannot start fails here,
	// and ask it which of its exports its plugin implements.
	in, err := p.newInstance()
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: start: %w", name, err)
	}
	if f := in.mod.ExportedFunction("jetplane_plugins"); f != nil {
		res, err := f.Call(in.ctx)
		if err == nil && len(res) == 0 {
			err = errors.New("no result")
		}
		if err != nil {
			rt.Close(ctx)
			return nil, fmt.Errorf("wasm plugin %s: jetplane_plugins: %w", name, err)
		}
		p.hasFilt = p.hasFilt && res[0]&1 != 0
		p.hasScore = p.hasScore && res[0]&2 != 0
		p.filtBatch = p.filtBatch && p.hasFilt
		p.scoreBatch = p.scoreBatch && p.hasScore
	}
	p.put(in)
	p.stopped.Add(1)
	go p.watchdog()
	return p, nil
}

// Name implements scheduler.Plugin.
func (p *Plugin) Name() string { return p.name }

// Version implements scheduler.Versioned: a digest of the module.
func (p *Plugin) Version() string { return p.version }

// Close stops the plugin and frees its instances.
func (p *Plugin) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	p.stopped.Wait()
	return p.rt.Close(context.Background())
}

// callCtx is what host functions need to answer one call; each instance
// has one, reachable from the context its calls run with.
type callCtx struct {
	pod    []byte
	node   *encodedNode
	reason string
	// A batch call's nodes and the reasons the guest gave, by index.
	nodes   []*encodedNode
	reasons []string
}

// setReason keeps the guest's reason, reusing the last string when the
// bytes are the same (a rejecting filter says the same thing for most
// nodes): no allocation per call.
func setReason(dst *string, b []byte, last *string) {
	if string(b) != *last {
		*last = string(b)
	}
	*dst = *last
}

type ctxKey struct{}

// The state word of an instance: 0 idle, an odd call number while a call
// runs, with killed set once the watchdog stopped that call.
const killed = uint64(1) << 63

// instance is one module instance. The watchdog stops a call past its
// budget by setting the instance's stop global (see instrument): the
// guest traps at its next loop header, and the instance is replaced.
type instance struct {
	mod         api.Module
	stop        api.MutableGlobal
	mem         api.Memory
	area        uint32 // 0: the guest has no context area
	batch       uint32 // the batch entries (decision 0031)
	batchCap    int
	filter      api.Function
	score       api.Function
	filterNodes api.Function
	scoreNodes  api.Function
	ctx         context.Context
	call        *callCtx
	lastReason  string
	stack       [1]uint64
	calls       uint64 // calls made, this instance's goroutine only
	state       atomic.Uint64
}

func (p *Plugin) newInstance() (*instance, error) {
	in := &instance{call: &callCtx{}}
	in.ctx = context.WithValue(context.Background(), ctxKey{}, in)
	cfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("%s-%d", p.name, p.seq.Add(1))).
		WithStartFunctions("_initialize")
	mod, err := p.rt.InstantiateModule(in.ctx, p.compiled, cfg)
	if err != nil {
		return nil, err
	}
	in.mod, in.mem = mod, mod.Memory()
	stop, ok := mod.ExportedGlobal(stopGlobal).(api.MutableGlobal)
	if !ok {
		mod.Close(in.ctx)
		return nil, errors.New("the instrumented module lacks its stop global")
	}
	in.stop = stop
	if p.hasArea {
		res, err := mod.ExportedFunction("jetplane_area").Call(in.ctx)
		if err != nil || len(res) == 0 || res[0] == 0 {
			mod.Close(in.ctx)
			return nil, fmt.Errorf("jetplane_area: %v", err)
		}
		in.area = uint32(res[0])
	}
	if p.filtBatch || p.scoreBatch {
		res, err := mod.ExportedFunction("jetplane_batch_area").Call(in.ctx)
		if err != nil || len(res) == 0 {
			mod.Close(in.ctx)
			return nil, fmt.Errorf("jetplane_batch_area: %v", err)
		}
		in.batch, in.batchCap = uint32(res[0]), int(res[0]>>32)
		if in.batch == 0 || in.batchCap == 0 {
			mod.Close(in.ctx)
			return nil, errors.New("jetplane_batch_area: empty")
		}
	}
	in.filter = mod.ExportedFunction("filter")
	in.score = mod.ExportedFunction("score")
	in.filterNodes = mod.ExportedFunction("jetplane_filter_nodes")
	in.scoreNodes = mod.ExportedFunction("jetplane_score_nodes")
	p.mu.Lock()
	p.all[in] = struct{}{}
	p.mu.Unlock()
	return in, nil
}

func (p *Plugin) get() (*instance, error) {
	select {
	case in := <-p.pool:
		return in, nil
	default:
		return p.newInstance()
	}
}

func (p *Plugin) put(in *instance) {
	select {
	case p.pool <- in:
	default:
		p.discard(in)
	}
}

func (p *Plugin) discard(in *instance) {
	p.mu.Lock()
	delete(p.all, in)
	p.mu.Unlock()
	_ = in.mod.Close(context.Background())
}

// watchdog stops calls that run past the budget: a call seen running for
// a whole budget (so between one and one and a quarter budgets) is
// marked killed and its stop global set; the guest traps at its next loop
// header. Calls themselves read no clock and start no goroutine.
func (p *Plugin) watchdog() {
	defer p.stopped.Done()
	tick := time.NewTicker(max(p.timeout/4, time.Millisecond))
	defer tick.Stop()
	type seen struct {
		state uint64
		since time.Time
	}
	running := map[*instance]seen{}
	for {
		select {
		case <-p.closed:
			return
		case now := <-tick.C:
			p.mu.Lock()
			next := make(map[*instance]seen, len(running))
			for in := range p.all {
				st := in.state.Load()
				if st&1 == 0 || st&killed != 0 {
					continue
				}
				w, ok := running[in]
				if !ok || w.state != st {
					next[in] = seen{st, now}
					continue
				}
				if now.Sub(w.since) >= p.timeout && in.state.CompareAndSwap(st, st|killed) {
					in.stop.Set(1)
					continue
				}
				next[in] = w
			}
			running = next
			p.mu.Unlock()
		}
	}
}

// begin marks in running a call; end reports whether the call ended
// before the watchdog stopped it.
func (in *instance) begin() uint64 {
	in.calls++
	id := in.calls<<1 | 1
	in.state.Store(id)
	return id
}

func (in *instance) end(id uint64) bool { return in.state.CompareAndSwap(id, 0) }

// failure is the error of a failed guest call.
func (p *Plugin) failure(err error, overrun bool) error {
	// wazero's error carries the guest's stack trace; the status keeps
	// the first line.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if overrun {
		return fmt.Errorf("guest ran past its %s budget (%s); its instance was replaced", p.timeout, msg)
	}
	return fmt.Errorf("guest failed (%s); its instance was replaced", msg)
}

// invoke runs one export with the pod and node of a call.
func (p *Plugin) invoke(fn api.Function, in *instance, cycle uint64, pod []byte, node *encodedNode) (uint64, string, error) {
	c := in.call
	c.pod, c.node, c.reason = pod, node, ""
	if in.area != 0 {
		mem := in.mem
		if !mem.WriteUint64Le(in.area, cycle) || !mem.WriteUint64Le(in.area+8, node.slot) || !mem.WriteUint64Le(in.area+16, node.rev) {
			p.discard(in)
			return 0, "", errors.New("guest context area is outside memory")
		}
	}
	id := in.begin()
	err := fn.CallWithStack(in.ctx, in.stack[:])
	ok := in.end(id)
	reason := c.reason
	c.pod, c.node = nil, nil
	if err != nil || !ok {
		p.discard(in)
		if err == nil {
			// It finished as the watchdog stopped it: the answer stands.
			return in.stack[0], reason, nil
		}
		return 0, "", p.failure(err, !ok)
	}
	p.put(in)
	return in.stack[0], reason, nil
}

// batchEntry is the size of one batch entry in guest memory: the node's
// slot, its revision, and the guest's result (decision 0031).
const batchEntry = 24

// invokeBatch runs a batch export over nodes, one call per chunk of the
// guest's batch area; results[i] and reasons[i] are nodes[i]'s.
func (p *Plugin) invokeBatch(fn func(*instance) api.Function, cycle uint64, pod []byte, nodes []*encodedNode, results []uint64, reasons []string) error {
	for lo := 0; lo < len(nodes); {
		in, err := p.get()
		if err != nil {
			return fmt.Errorf("new instance: %w", err)
		}
		hi := min(lo+in.batchCap, len(nodes))
		if err := p.callBatch(fn(in), in, cycle, pod, nodes[lo:hi], results[lo:hi], reasons[lo:hi]); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

func (p *Plugin) callBatch(fn api.Function, in *instance, cycle uint64, pod []byte, nodes []*encodedNode, results []uint64, reasons []string) error {
	c := in.call
	c.pod, c.nodes, c.reasons = pod, nodes, reasons
	defer func() { c.pod, c.nodes, c.reasons = nil, nil, nil }()
	size := uint32(len(nodes) * batchEntry)
	view, ok := in.mem.Read(in.batch, size)
	if !ok || !in.mem.WriteUint64Le(in.area, cycle) {
		p.discard(in)
		return errors.New("guest batch area is outside memory")
	}
	for i, e := range nodes {
		binary.LittleEndian.PutUint64(view[i*batchEntry:], e.slot)
		binary.LittleEndian.PutUint64(view[i*batchEntry+8:], e.rev)
	}
	in.stack[0] = uint64(len(nodes))
	id := in.begin()
	err := fn.CallWithStack(in.ctx, in.stack[:])
	finished := in.end(id)
	if err != nil {
		p.discard(in)
		return p.failure(err, !finished)
	}
	if in.stack[0] != 0 {
		p.discard(in)
		return fmt.Errorf("guest could not decode the pod or a node (code %d); its instance was replaced", uint32(in.stack[0]))
	}
	// The guest may have grown its memory: take the view again.
	if view, ok = in.mem.Read(in.batch, size); !ok {
		p.discard(in)
		return errors.New("guest batch area is outside memory")
	}
	for i := range nodes {
		results[i] = binary.LittleEndian.Uint64(view[i*batchEntry+16:])
	}
	if finished {
		p.put(in)
	} else {
		// It finished as the watchdog stopped it: the answers stand.
		p.discard(in)
	}
	return nil
}

// hostModules defines k8s.io/api and k8s.io/scheduler. The functions are
// api.GoModuleFunc, not reflective Go funcs: a reflective call costs more
// than the rest of a Filter call.
func (p *Plugin) hostModules(ctx context.Context) error {
	empty := &instance{call: &callCtx{}}
	inst := func(ctx context.Context) *instance {
		in, _ := ctx.Value(ctxKey{}).(*instance)
		if in == nil {
			return empty
		}
		return in
	}
	// write answers a (buf, buf_limit) → len call with d: written when it
	// fits, its length in any case.
	write := func(m api.Module, stack []uint64, ptr, limit uint32, d []byte) {
		if uint32(len(d)) <= limit {
			m.Memory().Write(ptr, d)
		}
		stack[0] = api.EncodeU32(uint32(len(d)))
	}
	i32 := api.ValueTypeI32
	_, err := p.rt.NewHostModuleBuilder("k8s.io/api").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		p.podFetches.Add(1)
		write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), inst(ctx).call.pod)
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("pod").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		p.nodeFetches.Add(1)
		var d []byte
		if n := inst(ctx).call.node; n != nil {
			d = n.data
		}
		write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), d)
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("nodeInfo/node").
		Instantiate(ctx)
	if err != nil {
		return err
	}
	const maxReason = 1024
	_, err = p.rt.NewHostModuleBuilder("k8s.io/scheduler").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		ptr, size := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if b, ok := m.Memory().Read(ptr, min(size, maxReason)); ok {
			in := inst(ctx)
			setReason(&in.call.reason, b, &in.lastReason)
		}
	}), []api.ValueType{i32, i32}, nil).Export("status_reason").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), p.config)
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("get_config").
		Instantiate(ctx)
	if err != nil {
		return err
	}
	// jetplane: the batch calls' node and reason, by the entry's index
	// (decision 0031).
	_, err = p.rt.NewHostModuleBuilder("jetplane").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		p.nodeFetches.Add(1)
		var d []byte
		if c, i := inst(ctx).call, api.DecodeU32(stack[0]); int(i) < len(c.nodes) {
			d = c.nodes[i].data
		}
		write(m, stack, api.DecodeU32(stack[1]), api.DecodeU32(stack[2]), d)
	}), []api.ValueType{i32, i32, i32}, []api.ValueType{i32}).Export("node_at").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		i, ptr, size := api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
		in := inst(ctx)
		if int(i) >= len(in.call.reasons) {
			return
		}
		if b, ok := m.Memory().Read(ptr, min(size, maxReason)); ok {
			setReason(&in.call.reasons[i], b, &in.lastReason)
		}
	}), []api.ValueType{i32, i32, i32}, nil).Export("reason_at").
		Instantiate(ctx)
	return err
}

// encodeNode returns node's protobuf, encoded once per revision.
func (p *Plugin) encodeNode(n *scheduler.NodeInfo) (*encodedNode, error) {
	name := n.Name()
	p.nodesMu.RLock()
	e := p.nodes[name]
	p.nodesMu.RUnlock()
	if e != nil && e.rev == n.Revision && n.Revision != 0 {
		return e, nil
	}
	data, err := n.Node.Marshal()
	if err != nil {
		return nil, err
	}
	p.nodesMu.Lock()
	defer p.nodesMu.Unlock()
	slot, ok := p.slots[name]
	if !ok {
		slot = uint64(len(p.slots))
		p.slots[name] = slot
	}
	rev := n.Revision
	if rev == 0 {
		// A node without revisions is encoded every call and must not
		// be cached by the guest either: use a fresh pseudo-revision.
		rev = ^uint64(0) - p.seq.Add(1)
	}
	e = &encodedNode{rev: rev, slot: slot, data: data}
	p.nodes[name] = e
	return e, nil
}

const podKey = "wasm/pod"

// podBytes is the cycle's pod in protobuf, encoded once per cycle (by
// PreFilter, or on first use).
func podBytes(state *scheduler.CycleState, pod *scheduler.PodInfo) ([]byte, error) {
	if v, ok := state.Read(podKey); ok {
		return v.([]byte), nil
	}
	data, err := pod.Pod.Marshal()
	if err != nil {
		return nil, err
	}
	state.Write(podKey, data)
	return data, nil
}

func (p *Plugin) preFilter(state *scheduler.CycleState, pod *scheduler.PodInfo) *scheduler.Status {
	if _, err := podBytes(state, pod); err != nil {
		return scheduler.AsStatus(err)
	}
	return nil
}

func (p *Plugin) filter(state *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) *scheduler.Status {
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	nb, err := p.encodeNode(node)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	in, err := p.get()
	if err != nil {
		return scheduler.AsStatus(fmt.Errorf("wasm plugin %s: filter: new instance: %w", p.name, err))
	}
	res, reason, err := p.invoke(in.filter, in, state.Cycle, pb, nb)
	if err != nil {
		return scheduler.AsStatus(fmt.Errorf("wasm plugin %s: filter: %w", p.name, err))
	}
	return status(uint32(res), reason)
}

func (p *Plugin) score(state *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) (int64, *scheduler.Status) {
	pb, err := podBytes(state, pod)
	if err != nil {
		return 0, scheduler.AsStatus(err)
	}
	nb, err := p.encodeNode(node)
	if err != nil {
		return 0, scheduler.AsStatus(err)
	}
	in, err := p.get()
	if err != nil {
		return 0, scheduler.AsStatus(fmt.Errorf("wasm plugin %s: score: new instance: %w", p.name, err))
	}
	res, reason, err := p.invoke(in.score, in, state.Cycle, pb, nb)
	if err != nil {
		return 0, scheduler.AsStatus(fmt.Errorf("wasm plugin %s: score: %w", p.name, err))
	}
	return int64(uint32(res >> 32)), status(uint32(res), reason)
}

// encodeNodes encodes (once per revision) the nodes of a batch.
func (p *Plugin) encodeNodes(nodes []*scheduler.NodeInfo) ([]*encodedNode, error) {
	out := make([]*encodedNode, len(nodes))
	for i, n := range nodes {
		e, err := p.encodeNode(n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// filterNodes judges nodes in batch calls when the guest has them, else
// one call per node.
func (p *Plugin) filterNodes(state *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, out []*scheduler.Status) {
	if !p.filtBatch {
		for i, n := range nodes {
			out[i] = p.filter(state, pod, n)
		}
		return
	}
	fail := func(err error) {
		st := scheduler.AsStatus(fmt.Errorf("wasm plugin %s: filter: %w", p.name, err))
		for i := range out {
			out[i] = st
		}
	}
	pb, err := podBytes(state, pod)
	if err != nil {
		fail(err)
		return
	}
	enc, err := p.encodeNodes(nodes)
	if err != nil {
		fail(err)
		return
	}
	results := make([]uint64, len(nodes))
	reasons := make([]string, len(nodes))
	if err := p.invokeBatch(func(in *instance) api.Function { return in.filterNodes }, state.Cycle, pb, enc, results, reasons); err != nil {
		fail(err)
		return
	}
	for i := range out {
		out[i] = status(uint32(results[i]), reasons[i])
	}
}

// scoreNodes scores nodes in batch calls when the guest has them, else
// one call per node.
func (p *Plugin) scoreNodes(state *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, scores []int64) *scheduler.Status {
	if !p.scoreBatch {
		for i, n := range nodes {
			s, st := p.score(state, pod, n)
			if !st.IsSuccess() {
				return st
			}
			scores[i] = s
		}
		return nil
	}
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	enc, err := p.encodeNodes(nodes)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	results := make([]uint64, len(nodes))
	reasons := make([]string, len(nodes))
	if err := p.invokeBatch(func(in *instance) api.Function { return in.scoreNodes }, state.Cycle, pb, enc, results, reasons); err != nil {
		return scheduler.AsStatus(fmt.Errorf("wasm plugin %s: score: %w", p.name, err))
	}
	for i, r := range results {
		if st := status(uint32(r), reasons[i]); !st.IsSuccess() {
			return st
		}
		scores[i] = int64(uint32(r >> 32))
	}
	return nil
}

// status maps the ABI's codes (Kubernetes' numbering) to the framework's.
func status(code uint32, reason string) *scheduler.Status {
	var reasons []string
	if reason != "" {
		reasons = []string{reason}
	}
	switch code {
	case 0:
		return nil
	case 1:
		return scheduler.NewStatus(scheduler.Error, reasons...)
	case 2:
		return scheduler.NewStatus(scheduler.Unschedulable, reasons...)
	case 3:
		return scheduler.NewStatus(scheduler.UnschedulableAndUnresolvable, reasons...)
	case 5:
		return scheduler.NewStatus(scheduler.Skip)
	}
	return scheduler.NewStatus(scheduler.Error, fmt.Sprintf("guest returned unknown status code %d", code))
}

// The plugin's shapes, by what the guest exports.
type (
	filterOnly  struct{ *Plugin }
	scoreOnly   struct{ *Plugin }
	filterScore struct{ *Plugin }
)

func (f filterOnly) PreFilter(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo) *scheduler.Status {
	return f.preFilter(s, pod)
}
func (f filterOnly) Filter(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) *scheduler.Status {
	return f.filter(s, pod, n)
}
func (f scoreOnly) Score(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) (int64, *scheduler.Status) {
	return f.score(s, pod, n)
}
func (f filterScore) PreFilter(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo) *scheduler.Status {
	return f.preFilter(s, pod)
}
func (f filterScore) Filter(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) *scheduler.Status {
	return f.filter(s, pod, n)
}
func (f filterScore) Score(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) (int64, *scheduler.Status) {
	return f.score(s, pod, n)
}
func (f filterOnly) FilterNodes(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, out []*scheduler.Status) {
	f.filterNodes(s, pod, nodes, out)
}
func (f filterScore) FilterNodes(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, out []*scheduler.Status) {
	f.filterNodes(s, pod, nodes, out)
}
func (f scoreOnly) ScoreNodes(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, scores []int64) *scheduler.Status {
	return f.scoreNodes(s, pod, nodes, scores)
}
func (f filterScore) ScoreNodes(_ context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, scores []int64) *scheduler.Status {
	return f.scoreNodes(s, pod, nodes, scores)
}

// Closer is implemented by every plugin Load returns.
type Closer interface{ Close() error }

var (
	_ scheduler.BatchFilterPlugin = filterOnly{}
	_ scheduler.BatchFilterPlugin = filterScore{}
	_ scheduler.BatchScorePlugin  = scoreOnly{}
	_ scheduler.BatchScorePlugin  = filterScore{}
	_ Closer                      = filterScore{}
	_                             = v1.Node{}
)
