package pod

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/jetplane/jetplane/internal/wasmcheck"
)

// wasmPage is WebAssembly's page size.
const wasmPage = 64 << 10

// wasmHost compiles each module once per digest (and memory limit), with
// wazero's on-disk compilation cache under the node's directory, and
// instantiates it per container start. Safe for concurrent use.
type wasmHost struct {
	cache wazero.CompilationCache
	dir   string // the compilation cache's directory

	mu       sync.Mutex
	runtimes map[uint32]wazero.Runtime // by memory limit in pages (0: none)
	modules  map[string]*compiled      // by digest and limit
}

type compiled struct {
	once sync.Once
	mod  wazero.CompiledModule
	err  error
	// alloc makes the module's linear memories: an imageAllocator when
	// they start with the module's data (which mod then lacks).
	alloc experimental.MemoryAllocator
}

func newWasmHost(dir string) (*wasmHost, error) {
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	return &wasmHost{cache: cache, dir: dir, runtimes: map[uint32]wazero.Runtime{}, modules: map[string]*compiled{}}, nil
}

// runtime is the wazero runtime for modules limited to pages of memory.
// A limit is a runtime setting in wazero, so each limit gets its own.
func (h *wasmHost) runtime(ctx context.Context, pages uint32) (wazero.Runtime, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rt, ok := h.runtimes[pages]; ok {
		return rt, nil
	}
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(h.cache).WithCloseOnContextDone(true)
	if pages > 0 {
		cfg = cfg.WithMemoryLimitPages(pages)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	h.runtimes[pages] = rt
	return rt, nil
}

// compile returns the module at path (digest names it), compiled once.
//
// What a Go module costs each start is mostly its data: tens of thousands
// of small segments, evaluated and copied into every new memory. So the
// module is compiled without them, and each instance's memory starts as a
// copy-on-write mapping of the memory they leave (splitData,
// imageAllocator), built once here; where that cannot be done (another
// platform, segments that cannot be moved) the segments are merged into a
// few instead (mergeDataSegments).
func (h *wasmHost) compile(ctx context.Context, digest, path string, pages uint32) (wazero.Runtime, *compiled, error) {
	rt, err := h.runtime(ctx, pages)
	if err != nil {
		return nil, nil, err
	}
	key := fmt.Sprintf("%s/%d", digest, pages)
	h.mu.Lock()
	c, ok := h.modules[key]
	if !ok {
		c = &compiled{}
		h.modules[key] = c
	}
	h.mu.Unlock()
	c.once.Do(func() {
		defer func() {
			// A module that breaks the compiler is refused, not fatal.
			if r := recover(); r != nil {
				c.mod, c.err = nil, fmt.Errorf("compile: the runtime failed on this module: %v", r)
			}
		}()
		ctx := context.WithoutCancel(ctx)
		var bin []byte
		if bin, c.err = os.ReadFile(path); c.err != nil {
			return
		}
		if c.err = wasmcheck.Bounded(bin); c.err != nil {
			return
		}
		if stripped, image, ok := splitData(bin); ok {
			if mod, err := rt.CompileModule(ctx, stripped); err == nil && fitsMemory(mod, len(image)) {
				if img, err := newImageAllocator(h.dir, image); err == nil {
					c.mod, c.alloc = mod, img
					return
				}
				_ = mod.Close(ctx)
			} else if err == nil {
				_ = mod.Close(ctx)
			}
		}
		c.mod, c.err = rt.CompileModule(ctx, mergeDataSegments(bin))
		c.alloc = memoryAllocator()
	})
	return rt, c, c.err
}

// fitsMemory tells whether a module's own memory, at its minimum, holds
// n bytes of data: what instantiation would have checked of the segments
// splitData took out.
func fitsMemory(mod wazero.CompiledModule, n int) bool {
	for _, m := range mod.ExportedMemories() {
		return uint64(m.Min())*wasmPage >= uint64(n)
	}
	return false
}

func (h *wasmHost) close(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rt := range h.runtimes {
		_ = rt.Close(ctx)
	}
	for _, c := range h.modules {
		// The allocators' images and kept mappings.
		if cl, ok := c.alloc.(io.Closer); ok {
			_ = cl.Close()
		}
	}
	_ = h.cache.Close(ctx)
}

// wasmSpec is one container start.
type wasmSpec struct {
	args           []string
	env            [][2]string
	stdout, stderr io.Writer
	// exited, when set, runs once the module has ended, before it is
	// reported so (the logs' last output goes first).
	exited func()
	mounts []mount
	pages  uint32
}

// mount is a volume as a module sees it at guest.
type mount struct {
	fs    *volumeFS
	guest string
}

// wasmProc is a running module. Its output's last bytes are kept for the
// exit message.
type wasmProc struct {
	cancel context.CancelFunc
	done   chan struct{}
	exit   Exit
	tail   *tailBuffer
	// stoppedSleeps counts the module's sleeps once it was stopped: one
	// at most, which ends it.
	stoppedSleeps atomic.Int32
}

func (p *wasmProc) Done() <-chan struct{} { return p.done }
func (p *wasmProc) Exit() Exit            { return p.exit }
func (p *wasmProc) Kill()                 { p.cancel(); <-p.done }

// start instantiates mod: the WASI start function runs in its own
// goroutine until the module exits, traps, or ctx ends.
func (h *wasmHost) start(ctx context.Context, rt wazero.Runtime, mod *compiled, s wasmSpec) *wasmProc {
	pctx, cancel := context.WithCancel(ctx)
	p := &wasmProc{cancel: cancel, done: make(chan struct{}), tail: &tailBuffer{max: 2048, watch: "out of memory"}}
	cfg := wazero.NewModuleConfig().WithName("").WithArgs(s.args...).
		WithStdout(s.stdout).WithStderr(io.MultiWriter(s.stderr, p.tail)).
		// WASI needs clocks and randomness to run a Go program; these are
		// the host's. Files only through the pod's volumes.
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader).
		// A module asleep in the host (a Go program whose goroutines all
		// wait) wakes when it is stopped, so stopping never waits for
		// its timer.
		WithNanosleep(func(ns int64) {
			if pctx.Err() == nil {
				t := time.NewTimer(time.Duration(ns))
				select {
				case <-t.C:
					return
				case <-pctx.Done():
					t.Stop()
				}
			}
			// Stopped: the module ends here, as proc_exit ends it.
			// Returning would hand a Go runtime a sleep cut short, which
			// it asks for again at once, and again, until the runtime's
			// own closer (a goroutine that may wait its turn for a core)
			// marks the module closed: milliseconds of CPU per stopped
			// pod, a thousand of them at once in a rollout.
			p.stoppedSleeps.Add(1)
			panic(sys.NewExitError(sys.ExitCodeContextCanceled))
		})
	for _, kv := range s.env {
		cfg = cfg.WithEnv(kv[0], kv[1])
	}
	if len(s.mounts) > 0 {
		fsc := wazero.NewFSConfig()
		for _, m := range s.mounts {
			fsc = fsc.(sysfs.FSConfig).WithSysFSMount(m.fs, m.guest)
		}
		cfg = cfg.WithFSConfig(fsc)
	}
	go func() {
		defer close(p.done)
		defer cancel()
		defer func() {
			if s.exited != nil {
				s.exited()
			}
		}()
		p.exit = instantiate(pctx, rt, mod, cfg, p.tail, s.pages)
	}()
	return p
}

// instantiate runs the module to its end. Whatever fails in it, the
// runtime's own code included (an allocator that cannot give a module its
// memory panics inside wazero), is this container's exit, never the
// process's.
func instantiate(ctx context.Context, rt wazero.Runtime, mod *compiled, cfg wazero.ModuleConfig, tail *tailBuffer, pages uint32) (exit Exit) {
	defer func() {
		if r := recover(); r != nil {
			exit = Exit{Code: 128, Reason: "ContainerCannotRun", Message: fmt.Sprintf("the runtime failed to run the module: %v", r)}
		}
	}()
	inst, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mod.alloc), mod.mod, cfg)
	if inst != nil {
		_ = inst.Close(context.Background())
	}
	return exitOf(err, tail, pages)
}

// exitOf turns how instantiation ended into an Exit.
func exitOf(err error, tail *tailBuffer, pages uint32) Exit {
	lastLine, oom := tail.lastLine(), tail.seen()
	if err == nil {
		return Exit{}
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		switch code := ee.ExitCode(); {
		case code == sys.ExitCodeContextCanceled || code == sys.ExitCodeDeadlineExceeded:
			return Exit{Code: 137, Reason: "Killed", Message: "stopped through its context"}
		case code != 0 && pages > 0 && oom != "":
			return Exit{Code: int32(code), Reason: "OOMKilled", Message: fmt.Sprintf("memory limit of %d bytes reached: %s", uint64(pages)*wasmPage, oom)}
		default:
			return Exit{Code: int32(code), Message: lastLine}
		}
	}
	// A trap: out of bounds, unreachable, stack exhausted, memory.grow
	// refused inside the runtime.
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i > 0 {
		msg = msg[:i]
	}
	reason := "Trap"
	if strings.Contains(msg, "out of memory") || pages > 0 && oom != "" {
		reason = "OOMKilled"
	}
	return Exit{Code: 134, Reason: reason, Message: msg}
}

// tailBuffer keeps the last max bytes written, and the first line that
// contained watch.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	watch string
	found string
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if t.watch != "" && t.found == "" {
		if i := bytes.Index(t.buf, []byte(t.watch)); i >= 0 {
			start := bytes.LastIndexByte(t.buf[:i], '\n') + 1
			end := bytes.IndexByte(t.buf[i:], '\n')
			if end < 0 {
				end = len(t.buf) - i
			}
			t.found = string(t.buf[start : i+end])
		}
	}
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) seen() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.found
}

func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 {
			return string(l)
		}
	}
	return ""
}

// CheckModule tells why module cannot run on a node: its declared sizes
// are out of proportion to its bytes (wasmcheck), or it does not decode
// or validate as WebAssembly (wazero's compiler checks what a node's
// would; the interpreter does it without generating code). Image push
// runs it, so that a module nobody can run is refused when pushed.
func CheckModule(ctx context.Context, module []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the runtime failed on it: %v", r)
		}
	}()
	if err := wasmcheck.Bounded(module); err != nil {
		return err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(context.WithoutCancel(ctx))
	mod, err := rt.CompileModule(ctx, module)
	if err != nil {
		return err
	}
	return mod.Close(ctx)
}
