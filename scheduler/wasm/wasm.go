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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/jetplane/jetplane/scheduler"
)

// Args are a WebAssembly plugin's pluginConfig args.
type Args struct {
	// GuestPath is the module file.
	GuestPath string `json:"guestPath"`
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

// Load compiles the module at a.GuestPath and returns the plugin; its
// type implements Filter and/or Score as the guest exports them.
func Load(ctx context.Context, name string, a Args) (scheduler.Plugin, error) {
	p, err := load(ctx, name, a)
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
	return nil, fmt.Errorf("wasm plugin %s: %s exports neither filter nor score", name, a.GuestPath)
}

func load(ctx context.Context, name string, a Args) (*Plugin, error) {
	if a.GuestPath == "" {
		return nil, errors.New("guestPath: required")
	}
	code, err := os.ReadFile(a.GuestPath)
	if err != nil {
		return nil, fmt.Errorf("guestPath: %w", err)
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
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(cache).WithMemoryLimitPages(pages).WithCloseOnContextDone(true))
	sum := sha256.Sum256(code)
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
	if p.compiled, err = rt.CompileModule(ctx, code); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: compile %s: %w", name, a.GuestPath, err)
	}
	exports := p.compiled.ExportedFunctions()
	_, p.hasFilt = exports["filter"]
	_, p.hasScore = exports["score"]
	if _, ok := exports["jetplane_area"]; !ok {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: %s does not export jetplane_area (build it with scheduler/guest)", name, a.GuestPath)
	}
	// Instantiate one now so that a module that cannot start fails here,
	// and ask it which of its exports its plugin implements.
	in, err := p.newInstance()
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: start: %w", name, err)
	}
	if f := in.mod.ExportedFunction("jetplane_plugins"); f != nil {
		res, err := f.Call(in.ctx)
		if err != nil {
			rt.Close(ctx)
			return nil, fmt.Errorf("wasm plugin %s: jetplane_plugins: %w", name, err)
		}
		p.hasFilt = p.hasFilt && res[0]&1 != 0
		p.hasScore = p.hasScore && res[0]&2 != 0
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
}

type ctxKey struct{}

// instance is one module instance with its own call context and a context
// the watchdog cancels when a call runs over its budget.
type instance struct {
	mod    api.Module
	area   uint32
	filter api.Function
	score  api.Function
	ctx    context.Context
	cancel context.CancelFunc
	call   *callCtx
	start  atomic.Int64 // unix nanos of the call in progress, 0 when idle
}

func (p *Plugin) newInstance() (*instance, error) {
	in := &instance{call: &callCtx{}}
	in.ctx, in.cancel = context.WithCancel(context.WithValue(context.Background(), ctxKey{}, in.call))
	cfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("%s-%d", p.name, p.seq.Add(1))).
		WithStartFunctions("_initialize")
	mod, err := p.rt.InstantiateModule(in.ctx, p.compiled, cfg)
	if err != nil {
		in.cancel()
		return nil, err
	}
	in.mod = mod
	res, err := mod.ExportedFunction("jetplane_area").Call(in.ctx)
	if err != nil {
		mod.Close(in.ctx)
		in.cancel()
		return nil, err
	}
	in.area = uint32(res[0])
	in.filter = mod.ExportedFunction("filter")
	in.score = mod.ExportedFunction("score")
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
	in.cancel()
	_ = in.mod.Close(context.Background())
}

// watchdog cancels calls that run past the budget; wazero then stops the
// guest at its next loop or call.
func (p *Plugin) watchdog() {
	defer p.stopped.Done()
	tick := time.NewTicker(max(p.timeout/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.closed:
			return
		case now := <-tick.C:
			p.mu.Lock()
			for in := range p.all {
				if s := in.start.Load(); s != 0 && now.UnixNano()-s > int64(p.timeout) {
					in.cancel()
				}
			}
			p.mu.Unlock()
		}
	}
}

// invoke runs one export with the pod and node of a call.
func (p *Plugin) invoke(fn func(*instance) api.Function, cycle uint64, pod []byte, node *encodedNode) (uint64, string, error) {
	in, err := p.get()
	if err != nil {
		return 0, "", fmt.Errorf("new instance: %w", err)
	}
	in.call.pod, in.call.node, in.call.reason = pod, node, ""
	mem := in.mod.Memory()
	if !mem.WriteUint64Le(in.area, cycle) || !mem.WriteUint64Le(in.area+8, node.slot) || !mem.WriteUint64Le(in.area+16, node.rev) {
		p.discard(in)
		return 0, "", errors.New("guest context area is outside memory")
	}
	in.start.Store(time.Now().UnixNano())
	res, err := fn(in).Call(in.ctx)
	in.start.Store(0)
	reason := in.call.reason
	in.call.pod, in.call.node = nil, nil
	if err != nil {
		overrun := in.ctx.Err() != nil
		p.discard(in)
		// wazero's error carries the guest's stack trace; the status keeps
		// the first line.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		if overrun {
			return 0, "", fmt.Errorf("guest ran past its %s budget (%s); its instance was replaced", p.timeout, msg)
		}
		return 0, "", fmt.Errorf("guest failed (%s); its instance was replaced", msg)
	}
	p.put(in)
	return res[0], reason, nil
}

// hostModules defines k8s.io/api and k8s.io/scheduler. The functions are
// api.GoModuleFunc, not reflective Go funcs: a reflective call costs more
// than the rest of a Filter call.
func (p *Plugin) hostModules(ctx context.Context) error {
	call := func(ctx context.Context) *callCtx {
		c, _ := ctx.Value(ctxKey{}).(*callCtx)
		if c == nil {
			return &callCtx{}
		}
		return c
	}
	// bufFunc answers a (buf, buf_limit) → len call with data: written
	// when it fits, its length in any case.
	bufFunc := func(data func(ctx context.Context) []byte) api.GoModuleFunc {
		return func(ctx context.Context, m api.Module, stack []uint64) {
			ptr, limit := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
			d := data(ctx)
			if uint32(len(d)) <= limit {
				m.Memory().Write(ptr, d)
			}
			stack[0] = api.EncodeU32(uint32(len(d)))
		}
	}
	i32 := api.ValueTypeI32
	_, err := p.rt.NewHostModuleBuilder("k8s.io/api").
		NewFunctionBuilder().WithGoModuleFunction(bufFunc(func(ctx context.Context) []byte { p.podFetches.Add(1); return call(ctx).pod }),
		[]api.ValueType{i32, i32}, []api.ValueType{i32}).Export("pod").
		NewFunctionBuilder().WithGoModuleFunction(bufFunc(func(ctx context.Context) []byte {
		p.nodeFetches.Add(1)
		if n := call(ctx).node; n != nil {
			return n.data
		}
		return nil
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("nodeInfo/node").
		Instantiate(ctx)
	if err != nil {
		return err
	}
	_, err = p.rt.NewHostModuleBuilder("k8s.io/scheduler").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		const maxReason = 1024
		ptr, size := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if b, ok := m.Memory().Read(ptr, min(size, maxReason)); ok {
			call(ctx).reason = string(b)
		}
	}), []api.ValueType{i32, i32}, nil).Export("status_reason").
		NewFunctionBuilder().WithGoModuleFunction(bufFunc(func(context.Context) []byte { return p.config }),
		[]api.ValueType{i32, i32}, []api.ValueType{i32}).Export("get_config").
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
	res, reason, err := p.invoke(func(in *instance) api.Function { return in.filter }, state.Cycle, pb, nb)
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
	res, reason, err := p.invoke(func(in *instance) api.Function { return in.score }, state.Cycle, pb, nb)
	if err != nil {
		return 0, scheduler.AsStatus(fmt.Errorf("wasm plugin %s: score: %w", p.name, err))
	}
	return int64(uint32(res >> 32)), status(uint32(res), reason)
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

// Closer is implemented by every plugin Load returns.
type Closer interface{ Close() error }

var (
	_ scheduler.FilterPlugin = filterOnly{}
	_ scheduler.ScorePlugin  = scoreOnly{}
	_ Closer                 = filterScore{}
	_                        = v1.Node{}
)
