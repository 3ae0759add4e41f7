// Package wasm runs scheduler plugins compiled to WebAssembly inside the
// scheduler, on wazero. It owns the host side of the ABI of
// kubernetes-sigs/kube-scheduler-wasm-extension at UpstreamCommit: the
// host modules k8s.io/api, k8s.io/scheduler and k8s.io/klog (HostFunctions),
// the guest exports of every extension point, their status and score
// encodings, the lifecycle (_start registers the plugin; a trap there
// refuses it at load) and upstream's plugin args (guestURL, guestConfig,
// logSeverity). Decision 0055 records the ABI, 0056 the configuration.
//
// jetplane adds, as extensions a guest may use and upstream ignores: a
// context area the host writes before each call, so that a guest built
// with scheduler/guest decodes the pod once per cycle and each node once
// per revision (decision 0018), and batch exports judging many nodes per
// call (decision 0031); such a guest imports nothing upstream lacks.
//
// A module is compiled once (with an on-disk compilation cache) and runs
// in instances. A guest of upstream's shape keeps its cycle state in its
// memory, so, as upstream does, one instance serves a pod's scheduling
// cycle (calls serialized) and then its binding cycle; a guest with
// jetplane's batch exports keeps none, and its Filter and Score calls run
// on a pool of instances in parallel. Each call has a time budget and each
// instance a memory limit. A guest that traps, exits, loops or exhausts its
// memory fails that call with the reason and its output, its instance is
// thrown away, and the next call gets a fresh one. Nothing else in
// jetplane imports wazero.
package wasm

import (
	"bytes"
	"context"
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
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/wasmcheck"
	"github.com/jetplane/jetplane/scheduler"
)

// Factory builds WebAssembly plugins for a scheduler.Registry: register it
// under scheduler.WasmPlugin.
func Factory(name string, raw json.RawMessage) (scheduler.Plugin, error) {
	a, err := ParseArgs(raw)
	if err != nil {
		return nil, err
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
		a, err := ParseArgs(raw)
		if err != nil {
			return nil, err
		}
		return LoadFrom(context.Background(), name, a, images)
	}
	return r
}

// The guest exports of upstream's ABI, by extension point.
const (
	exEnqueue        = "enqueue"
	exPreFilter      = "prefilter"
	exFilter         = "filter"
	exPostFilter     = "postfilter"
	exPreScore       = "prescore"
	exScore          = "score"
	exNormalizeScore = "normalizescore"
	exReserve        = "reserve"
	exUnreserve      = "unreserve"
	exPermit         = "permit"
	exPreBind        = "prebind"
	exBind           = "bind"
	exPostBind       = "postbind"
	exAddPod         = "addpod"
	exRemovePod      = "removepod"
)

// guestExports are upstream's exports with their signatures ("" no
// result).
var guestExports = map[string]api.ValueType{
	exEnqueue: 0, exPreFilter: i32, exFilter: i32, exPostFilter: i64, exPreScore: i32, exScore: i64,
	exNormalizeScore: i32, exReserve: i32, exUnreserve: 0, exPermit: i64, exPreBind: i32, exBind: i32,
	exPostBind: 0, exAddPod: i32, exRemovePod: i32,
}

// Plugin is one loaded module; it implements every extension point's
// methods and scheduler.PartialPlugin says which the guest has. Close
// releases it.
type Plugin struct {
	name        string
	version     string
	config      []byte
	logSeverity int32
	timeout     time.Duration

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	start    string // _start, _initialize or none
	exports  map[string]bool
	events   []scheduler.ClusterEvent

	// hasArea: the guest exports jetplane_area (built with
	// scheduler/guest). filtBatch and scoreBatch: it exports
	// jetplane_filter_nodes / jetplane_score_nodes (decision 0031).
	// parallel: it keeps no state between calls (area, and no export but
	// filter and score), so its calls run on any instance.
	hasArea               bool
	filtBatch, scoreBatch bool
	parallel              bool

	handleMu sync.RWMutex
	h        scheduler.Handle

	pool    chan *instance
	mu      sync.Mutex
	all     map[*instance]struct{}
	seq     atomic.Uint64
	closed  chan struct{}
	stopped sync.WaitGroup

	// The instances of a stateful guest, as upstream's pool: the one of
	// the scheduling cycle, and those of binding cycles by pod.
	assignMu  sync.Mutex
	scheduled *instance
	binding   map[types.UID]*instance

	// podFetches and nodeFetches count the guest's pod and node host
	// calls (how often it had to decode).
	podFetches, nodeFetches atomic.Uint64

	// nodeKey keeps each node's encoding with the node (NodeValue);
	// slots numbers the nodes for the guest's cache.
	nodeKey *scheduler.NodeValueKey
	nodesMu sync.Mutex
	slots   map[string]uint64
}

var (
	_ scheduler.PartialPlugin         = (*Plugin)(nil)
	_ scheduler.PreFilterResultPlugin = (*Plugin)(nil)
	_ scheduler.BatchFilterPlugin     = (*Plugin)(nil)
	_ scheduler.PostFilterPlugin      = (*Plugin)(nil)
	_ scheduler.PreScorePlugin        = (*Plugin)(nil)
	_ scheduler.BatchScorePlugin      = (*Plugin)(nil)
	_ scheduler.NormalizeScorePlugin  = (*Plugin)(nil)
	_ scheduler.ReservePlugin         = (*Plugin)(nil)
	_ scheduler.PermitPlugin          = (*Plugin)(nil)
	_ scheduler.PreBindPlugin         = (*Plugin)(nil)
	_ scheduler.BindPlugin            = (*Plugin)(nil)
	_ scheduler.PostBindPlugin        = (*Plugin)(nil)
	_ scheduler.EnqueueExtensions     = (*Plugin)(nil)
	_ scheduler.HandleUser            = (*Plugin)(nil)
	_ scheduler.Versioned             = (*Plugin)(nil)
	_ Closer                          = (*Plugin)(nil)
)

// encodedNode is a node's protobuf as the guests see it. rev is the
// revision the guests cache it under: the node object's revision, or for
// a node object without one (revision 0) a pseudo-revision of its own,
// taken once when it is encoded; of is the NodeInfo revision it was
// encoded from.
type encodedNode struct {
	name string
	rev  uint64
	of   uint64
	slot uint64
	data []byte
}

// Load compiles the module a names (Args.Image needs LoadFrom) and
// returns the plugin.
func Load(ctx context.Context, name string, a Args) (scheduler.Plugin, error) {
	return LoadFrom(ctx, name, a, nil)
}

// LoadFrom is Load with an image store for Args.Image.
func LoadFrom(ctx context.Context, name string, a Args, images ImageSource) (scheduler.Plugin, error) {
	p, err := load(ctx, name, a, images)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func load(ctx context.Context, name string, a Args, images ImageSource) (*Plugin, error) {
	code, digest, err := module(ctx, a, images)
	if err != nil {
		return nil, fmt.Errorf("wasm plugin %s: %w", name, err)
	}
	source := a.GuestURL + a.GuestPath + a.Image
	timeout := time.Second
	if a.Timeout != "" {
		if timeout, err = time.ParseDuration(a.Timeout); err != nil || timeout <= 0 {
			return nil, fmt.Errorf("args: timeout: %q is not a positive duration", a.Timeout)
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
	// The runtime sizes what it decodes by the module's declarations:
	// a plugin out of proportion to its bytes is refused before either
	// the instrumenter or the runtime reads it.
	if err := wasmcheck.Bounded(code); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: %s: %w", name, source, err)
	}
	instrumented, err := instrument(code)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: %s: %w", name, source, err)
	}
	p := &Plugin{name: name, version: "wasm/" + digest[:len("sha256:")+16], config: []byte(a.GuestConfig),
		logSeverity: a.LogSeverity, timeout: timeout, rt: rt, pool: make(chan *instance, 64), all: map[*instance]struct{}{},
		closed: make(chan struct{}), binding: map[types.UID]*instance{}, nodeKey: scheduler.NewNodeValueKey(), slots: map[string]uint64{}}
	fail := func(err error) (*Plugin, error) {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm plugin %s: %s: %w", name, source, err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fail(err)
	}
	if err := p.hostModules(ctx); err != nil {
		return fail(err)
	}
	if p.compiled, err = rt.CompileModule(ctx, instrumented); err != nil {
		return fail(fmt.Errorf("compile: %w", err))
	}
	if _, ok := p.compiled.ExportedMemories()["memory"]; !ok {
		return fail(errors.New("the guest does not export its memory"))
	}
	if err := p.detectExports(); err != nil {
		return fail(err)
	}
	// Instantiate one now: a module whose _start (or _initialize) traps
	// or exits is refused here, as upstream refuses it.
	in, err := p.newInstance()
	if err != nil {
		return fail(err)
	}
	if err := p.askPlugins(in); err != nil {
		return fail(err)
	}
	if err := p.askEvents(in); err != nil {
		return fail(err)
	}
	p.put(in)
	p.stopped.Add(1)
	go p.watchdog()
	return p, nil
}

// detectExports reads which extension points the guest exports, checks
// their signatures as upstream does, and refuses what upstream refuses.
func (p *Plugin) detectExports() error {
	p.exports = map[string]bool{}
	fns := p.compiled.ExportedFunctions()
	for name, want := range guestExports {
		f, ok := fns[name]
		if !ok {
			continue
		}
		results := f.ResultTypes()
		if len(f.ParamTypes()) != 0 || (want == 0) != (len(results) == 0) || (want != 0 && (len(results) != 1 || results[0] != want)) {
			shape := "()"
			if want != 0 {
				shape = "(" + api.ValueTypeName(want) + ")"
			}
			return fmt.Errorf("the guest exports the wrong signature for func[%s]: should be () -> %s", name, shape)
		}
		p.exports[name] = true
	}
	_, p.hasArea = fns["jetplane_area"]
	_, hasBatch := fns["jetplane_batch_area"]
	_, p.filtBatch = fns["jetplane_filter_nodes"]
	_, p.scoreBatch = fns["jetplane_score_nodes"]
	p.filtBatch = p.filtBatch && hasBatch && p.hasArea
	p.scoreBatch = p.scoreBatch && hasBatch && p.hasArea
	if !p.exports[exFilter] && !p.exports[exScore] && !p.exports[exReserve] && !p.exports[exPermit] && !p.exports[exBind] {
		return errors.New("the guest exports none of filter, score, reserve, permit and bind")
	}
	if p.exports[exPreScore] && !p.exports[exScore] {
		return errors.New("the guest exports prescore without score")
	}
	if p.exports[exNormalizeScore] && !p.exports[exScore] {
		return errors.New("the guest exports normalizescore without score")
	}
	p.parallel = p.hasArea
	for name := range p.exports {
		if name != exFilter && name != exScore {
			p.parallel = false
		}
	}
	switch {
	case fns["_start"] != nil:
		p.start = "_start"
	case fns["_initialize"] != nil:
		// A WASI reactor (standard Go's -buildmode=c-shared) registers in
		// its initialisers.
		p.start = "_initialize"
	}
	return nil
}

// askPlugins asks a guest built with scheduler/guest which of filter and
// score its plugin implements (the SDK exports both).
func (p *Plugin) askPlugins(in *instance) error {
	f := in.mod.ExportedFunction("jetplane_plugins")
	if f == nil {
		return nil
	}
	res, err := f.Call(in.ctx)
	if err == nil && len(res) == 0 {
		err = errors.New("no result")
	}
	if err != nil {
		return fmt.Errorf("jetplane_plugins: %w", err)
	}
	p.exports[exFilter] = p.exports[exFilter] && res[0]&1 != 0
	p.exports[exScore] = p.exports[exScore] && res[0]&2 != 0
	p.filtBatch = p.filtBatch && p.exports[exFilter]
	p.scoreBatch = p.scoreBatch && p.exports[exScore]
	if !p.exports[exFilter] && !p.exports[exScore] {
		return errors.New("the guest's plugin implements neither Filter nor Score")
	}
	return nil
}

// askEvents calls enqueue once, as kube-scheduler asks EventsToRegister
// once: a guest that traps there is refused.
func (p *Plugin) askEvents(in *instance) error {
	p.events = allClusterEvents
	if !p.exports[exEnqueue] {
		return nil
	}
	in.call.reset()
	if _, err := p.call(in, exEnqueue, in.fn(exEnqueue)); err != nil {
		return err
	}
	if len(in.call.events) > 0 {
		p.events = in.call.events
	}
	in.call.reset()
	return nil
}

// Name implements scheduler.Plugin.
func (p *Plugin) Name() string { return p.name }

// Version implements scheduler.Versioned: a digest of the module.
func (p *Plugin) Version() string { return p.version }

// SetHandle implements scheduler.HandleUser.
func (p *Plugin) SetHandle(h scheduler.Handle) {
	p.handleMu.Lock()
	defer p.handleMu.Unlock()
	p.h = h
}

func (p *Plugin) handle() scheduler.Handle {
	p.handleMu.RLock()
	defer p.handleMu.RUnlock()
	if p.h == nil {
		return scheduler.NopHandle{}
	}
	return p.h
}

// Implements implements scheduler.PartialPlugin: the extension points the
// guest exports.
func (p *Plugin) Implements(point string) bool {
	switch point {
	case scheduler.PointPreFilter:
		// Always, as upstream: a stateful guest's cycle starts there.
		return p.exports[exPreFilter] || !p.parallel
	case scheduler.PointFilter:
		return p.exports[exFilter]
	case scheduler.PointPostFilter:
		return p.exports[exPostFilter]
	case scheduler.PointPreScore:
		return p.exports[exPreScore]
	case scheduler.PointScore:
		return p.exports[exScore]
	case scheduler.PointReserve:
		return p.exports[exReserve] || p.exports[exUnreserve]
	case scheduler.PointPermit:
		return p.exports[exPermit]
	case scheduler.PointPreBind:
		return p.exports[exPreBind]
	case scheduler.PointBind:
		return p.exports[exBind]
	case scheduler.PointPostBind:
		// Also for a guest with a binding cycle and no postbind: PostBind
		// ends the cycle and frees the pod's instance.
		return p.exports[exPostBind] || p.exports[exPermit] || p.exports[exPreBind] || p.exports[exBind]
	}
	return false
}

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

type ctxKey struct{}

// The state word of an instance: 0 idle, an odd call number while a call
// runs, with killed set once the watchdog stopped that call.
const killed = uint64(1) << 63

// instance is one module instance. The watchdog stops a call past its
// budget by setting the instance's stop global (see instrument): the
// guest traps at its next loop header, and the instance is replaced.
type instance struct {
	mod      api.Module
	stop     api.MutableGlobal
	mem      api.Memory
	area     uint32 // 0: the guest has no context area
	batch    uint32 // the batch entries (decision 0031)
	batchCap int
	fns      map[string]api.Function
	ctx      context.Context
	call     *callCtx
	// out is the guest's stdout and stderr since the last call.
	out        *bytes.Buffer
	lastReason string
	stack      [1]uint64
	calls      uint64 // calls made, by the goroutine holding the instance
	state      atomic.Uint64
	// mu serializes the calls of a stateful guest's instance.
	mu sync.Mutex
}

func (in *instance) fn(name string) api.Function { return in.fns[name] }

// currentNodeName is the node of the call: in a batch call, the entry the
// guest wrote into its context area.
func (in *instance) currentNodeName() string {
	c := in.call
	if c.nodes != nil {
		if i, ok := in.batchIndex(); ok {
			return c.nodes[i].name
		}
		return ""
	}
	if c.node != nil {
		return c.node.name
	}
	return c.nodeName
}

// batchIndex is the batch entry the guest is at (the context area's
// fourth word).
func (in *instance) batchIndex() (int, bool) {
	i, ok := in.mem.ReadUint64Le(in.area + 24)
	if !ok || i >= uint64(len(in.call.nodes)) {
		return 0, false
	}
	return int(i), true
}

func (p *Plugin) newInstance() (*instance, error) {
	in := &instance{call: &callCtx{}, out: &bytes.Buffer{}}
	in.ctx = context.WithValue(context.Background(), ctxKey{}, in)
	cfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("%s-%d", p.name, p.seq.Add(1))).
		WithStdout(in.out).WithStderr(in.out)
	if p.start != "" {
		cfg = cfg.WithStartFunctions(p.start)
	} else {
		cfg = cfg.WithStartFunctions()
	}
	mod, err := p.rt.InstantiateModule(experimental.WithMemoryAllocator(in.ctx, heapMemories), p.compiled, cfg)
	if err != nil {
		return nil, guestError(in.out.String(), p.start, err)
	}
	if mod.IsClosed() {
		return nil, fmt.Errorf("%s exited: the guest must stay alive after registering its plugin (build standard Go as a reactor, -buildmode=c-shared, registering in init)", p.start)
	}
	if s := in.out.String(); s != "" {
		p.logOutput(s)
		in.out.Reset()
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
	in.fns = map[string]api.Function{}
	for name := range guestExports {
		if f := mod.ExportedFunction(name); f != nil {
			in.fns[name] = f
		}
	}
	for _, name := range []string{"jetplane_filter_nodes", "jetplane_score_nodes"} {
		if f := mod.ExportedFunction(name); f != nil {
			in.fns[name] = f
		}
	}
	p.mu.Lock()
	p.all[in] = struct{}{}
	p.mu.Unlock()
	return in, nil
}

// get takes a free instance, or makes one.
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
	p.assignMu.Lock()
	if p.scheduled == in {
		p.scheduled = nil
	}
	for uid, b := range p.binding {
		if b == in {
			delete(p.binding, uid)
		}
	}
	p.assignMu.Unlock()
	_ = in.mod.Close(context.Background())
}

// scheduling returns the instance of the scheduling cycle, as upstream's
// doWithSchedulingGuest: cycles run one after another, so the instance
// carries over to the next cycle unless a binding cycle took it.
func (p *Plugin) scheduling() (*instance, error) {
	p.assignMu.Lock()
	defer p.assignMu.Unlock()
	if p.scheduled != nil {
		return p.scheduled, nil
	}
	in, err := p.get()
	if err != nil {
		return nil, err
	}
	p.scheduled = in
	return in, nil
}

// forBinding returns pod's binding instance: the scheduling one moves to
// the binding cycle (it holds the pod's cycle state), as upstream's
// getForBinding.
func (p *Plugin) forBinding(uid types.UID) (*instance, error) {
	p.assignMu.Lock()
	defer p.assignMu.Unlock()
	if in := p.binding[uid]; in != nil {
		return in, nil
	}
	in := p.scheduled
	p.scheduled = nil
	if in == nil {
		// The instance was replaced after a failure: the pod's cycle
		// state is gone, as the guest's would be after a restart.
		var err error
		if in, err = p.get(); err != nil {
			return nil, err
		}
	}
	p.binding[uid] = in
	return in, nil
}

// freeBinding ends pod's binding cycle: its instance goes back to the pool.
func (p *Plugin) freeBinding(uid types.UID) {
	p.assignMu.Lock()
	in := p.binding[uid]
	delete(p.binding, uid)
	p.assignMu.Unlock()
	if in != nil {
		p.put(in)
	}
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

// call runs export name on in with in.stack as its parameters and
// results. The guest's output goes to the scheduler's log; a failed call
// (trap, exit, overrun) throws the instance away and says why, with the
// guest's output, as upstream's decorateError.
func (p *Plugin) call(in *instance, name string, fn api.Function) (uint64, error) {
	id := in.begin()
	err := fn.CallWithStack(in.ctx, in.stack[:])
	finished := in.end(id)
	out := in.out.String()
	in.out.Reset()
	if out != "" {
		p.logOutput(out)
	}
	if err != nil {
		p.discard(in)
		if !finished {
			return 0, fmt.Errorf("wasm: %s error: guest ran past its %s budget; its instance was replaced", name, p.timeout)
		}
		return 0, guestError(out, name, err)
	}
	if !finished {
		// It finished as the watchdog stopped it: the answer stands, the
		// instance goes.
		p.discard(in)
	}
	return in.stack[0], nil
}

// guestError is a failed guest call's error: "wasm: <export> error:", the
// guest's output (a panic's message), then wazero's first line.
func guestError(out, name string, err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "panic: ") {
		// A Go panic: its message, not the goroutine dump (that goes to
		// the log).
		out, _, _ = strings.Cut(out, "\n\n")
	}
	if len(out) > maxReason {
		out = out[:maxReason] + "…"
	}
	if out != "" {
		return fmt.Errorf("wasm: %s error: %s\n%s (its instance was replaced)", name, out, msg)
	}
	return fmt.Errorf("wasm: %s error: %s (its instance was replaced)", name, msg)
}

// maxLoggedOutput bounds the output of one call the log keeps.
const maxLoggedOutput = 8 << 10

// logOutput writes a guest's stdout and stderr of one call to the
// scheduler's log.
func (p *Plugin) logOutput(out string) {
	out = strings.TrimRight(out, "\n")
	if len(out) > maxLoggedOutput {
		out = out[:maxLoggedOutput] + "…"
	}
	p.handle().Logger().Info("wasm guest output", "plugin", p.name, "output", out)
}

// encodeNode returns node's protobuf, encoded once per node object and
// kept with it (NodeValue), so that a cycle reaches it without a lookup by
// name. A node object without a revision (0) is kept the same way, under
// a pseudo-revision taken once: encoding it afresh on every call made the
// guests decode it on every call too.
func (p *Plugin) encodeNode(n *scheduler.NodeInfo) (*encodedNode, error) {
	if e, ok := n.NodeValue(p.nodeKey).(*encodedNode); ok && e.of == n.Revision {
		return e, nil
	}
	data, err := n.Node.Marshal()
	if err != nil {
		return nil, err
	}
	name := n.Name()
	p.nodesMu.Lock()
	slot, ok := p.slots[name]
	if !ok {
		slot = uint64(len(p.slots))
		p.slots[name] = slot
	}
	p.nodesMu.Unlock()
	rev := n.Revision
	if rev == 0 {
		// Revisions count up from 1; pseudo-revisions count down from
		// the top, so that the guests never take one for the other.
		rev = ^uint64(0) - p.seq.Add(1)
	}
	e := &encodedNode{name: name, rev: rev, of: n.Revision, slot: slot, data: data}
	n.StoreNodeValue(p.nodeKey, e)
	return e, nil
}

const podKey = "wasm/pod"

// podBytes is the cycle's pod in protobuf, encoded once per cycle.
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

// Closer is implemented by every plugin Load returns.
type Closer interface{ Close() error }
