package pod

import (
	"context"
	"crypto/ecdh"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetplane/jetplane/events"
	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// Clock is the node's clock: backoffs and deadlines wait on it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ScaledClock runs factor times faster than real time, for tests and demos
// of backoffs measured in minutes.
func ScaledClock(factor float64) Clock {
	return &scaled{start: time.Now(), factor: factor}
}

type scaled struct {
	start  time.Time
	factor float64
}

func (s *scaled) Now() time.Time {
	return s.start.Add(time.Duration(float64(time.Since(s.start)) * s.factor))
}

func (s *scaled) After(d time.Duration) <-chan time.Time {
	return time.After(time.Duration(float64(d) / s.factor))
}

// AgentConfig configures a node agent.
type AgentConfig struct {
	// Node is the node's name (DNS-1123 subdomain).
	Node string
	// Conn is the agent's NATS connection, confined to its node's names.
	Conn *events.NodeConn
	// Dir is the node's own directory: the image cache, the compilation
	// cache and, under volumes/<pod uid>/<volume>, emptyDir volumes. Keep
	// it outside any data directory: what a pod writes lives here
	// (`jetplane serve` uses <data>-node).
	Dir string
	// CompileCache is wazero's compilation cache directory (default
	// Dir/compiled); agents on one machine may share one.
	CompileCache string
	// Labels and Taints are the Node's.
	Labels map[string]string
	Taints []corev1.Taint
	// CPU, Memory and Pods are the node's capacity; zero detects (cores,
	// physical memory, 1000 pods).
	CPU, Memory resource.Quantity
	Pods        int
	// HostPathRoots are the host directories hostPath volumes may be in;
	// empty refuses every hostPath volume.
	HostPathRoots []string
	// MaxImageBytes bounds a pulled module (default 64 MiB).
	MaxImageBytes int64
	// DefaultMemoryLimit is a container's memory limit when its spec
	// sets none (default DefaultMemoryLimit).
	DefaultMemoryLimit int64
	// MaxVolumeBytes bounds what one pod's emptyDir volumes hold together
	// (default DefaultMaxVolumeBytes); an emptyDir's sizeLimit bounds it
	// alone.
	MaxVolumeBytes int64
	// MaxLogBytes bounds the output one start of one container
	// publishes (default DefaultMaxLogBytes); past it the rest is dropped
	// with one line saying so.
	MaxLogBytes int64
	// Heartbeat is how often the node reports (default 10 s).
	Heartbeat time.Duration
	// Clock drives backoffs and deadlines (default real time).
	Clock  Clock
	Logger *slog.Logger
}

func (c *AgentConfig) validate() error {
	switch {
	case c.Node == "" || len(c.Node) > 253 || strings.ContainsAny(c.Node, " \t/*>"):
		return fmt.Errorf("node name %q: give a DNS-1123 subdomain", c.Node)
	case c.Conn == nil:
		return errors.New("node agent: no connection")
	case c.Dir == "":
		return errors.New("node agent: no directory for the image cache")
	}
	for _, r := range c.HostPathRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("host path root %q: must be absolute", r)
		}
	}
	if c.MaxImageBytes <= 0 {
		c.MaxImageBytes = events.DefaultMaxImageBytes
	}
	if c.DefaultMemoryLimit <= 0 {
		c.DefaultMemoryLimit = DefaultMemoryLimit
	}
	if c.DefaultMemoryLimit < wasmPage {
		return fmt.Errorf("default memory limit %d: below one WebAssembly page (64Ki)", c.DefaultMemoryLimit)
	}
	if c.MaxVolumeBytes <= 0 {
		c.MaxVolumeBytes = DefaultMaxVolumeBytes
	}
	if c.MaxLogBytes <= 0 {
		c.MaxLogBytes = DefaultMaxLogBytes
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CPU.IsZero() {
		c.CPU = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
	}
	if c.Memory.IsZero() {
		c.Memory = *resource.NewQuantity(physicalMemory(), resource.BinarySI)
	}
	if c.Pods <= 0 {
		c.Pods = 1000
	}
	return nil
}

// The node's defaults for what a pod may use.
const (
	// DefaultMemoryLimit is a container's memory when it sets no limit.
	DefaultMemoryLimit = 256 << 20
	// DefaultMaxVolumeBytes is what a pod's emptyDir volumes may hold.
	DefaultMaxVolumeBytes = 1 << 30
	// DefaultMaxLogBytes is the output one container start may publish.
	DefaultMaxLogBytes = 16 << 20
)

// physicalMemory reads the machine's memory (Linux), 8 GiB when unknown.
func physicalMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 8 << 30
}

// Agent is a node agent: it heartbeats, and runs the pods bound to its
// node, each through the pod state machine, reporting every state entered.
type Agent struct {
	cfg  AgentConfig
	host *wasmHost
	// key opens the Secret values sealed for this node (Dir/seal.key).
	key *ecdh.PrivateKey

	reports *reporter

	mu    sync.Mutex
	pods  map[string]*podRunner // namespace/name
	pulls map[string]*sync.Mutex
	// present maps an image reference to the digest it resolved to when
	// the node last pulled it (nodeEnv.Pull).
	present map[string]string
	quotas  map[string]*quota // a pod's volumes' quota, by uid
	closed  bool
}

type podRunner struct {
	uid    string
	cancel context.CancelFunc // deletion
	done   chan struct{}
	// deleted is when the agent learnt of the pod's deletion (UnixNano; 0
	// while it is not deleted).
	deleted atomic.Int64
	// silent: the pod's work item is gone (the pod finalized); whatever
	// the machine still enters is not reported.
	silent atomic.Bool
}

// NewAgent validates cfg.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for _, d := range []string{"images", "volumes"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if cfg.CompileCache == "" {
		cfg.CompileCache = filepath.Join(cfg.Dir, "compiled")
	}
	host, err := newWasmHost(cfg.CompileCache)
	if err != nil {
		return nil, err
	}
	key, err := loadSealKey(filepath.Join(cfg.Dir, "seal.key"))
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, host: host, key: key, pods: map[string]*podRunner{}, pulls: map[string]*sync.Mutex{}, present: map[string]string{}, quotas: map[string]*quota{}}
	a.reports = &reporter{a: a, wake: make(chan struct{}, 1)}
	return a, nil
}

// loadSealKey reads the node's X25519 key from path, creating it (mode
// 0600) on first start. Its public half goes in every heartbeat.
func loadSealKey(path string) (*ecdh.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err := ecdh.X25519().GenerateKey(crand.Reader)
		if err != nil {
			return nil, err
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, key.Bytes(), 0o600); err != nil {
			return nil, fmt.Errorf("node seal key: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, fmt.Errorf("node seal key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node seal key: %w", err)
	}
	key, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("node seal key %s: %w; remove it to make a new one (pods holding Secret values are then sealed again for the new key)", path, err)
	}
	return key, nil
}

// Start runs until ctx ends: heartbeats, and the pods of the node's work.
// On the way out it stops the modules without reporting (a stopped agent
// is a node that went silent, not a deletion).
func (a *Agent) Start(ctx context.Context) error {
	defer a.host.close(context.Background())
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		a.mu.Lock()
		a.closed = true
		runners := make([]*podRunner, 0, len(a.pods))
		for _, r := range a.pods {
			runners = append(runners, r)
		}
		a.mu.Unlock()
		stop()
		for _, r := range runners {
			<-r.done
		}
	}()
	if err := a.beat(ctx); err != nil {
		return err
	}
	reporting := make(chan struct{})
	go func() {
		defer close(reporting)
		a.reports.run(ctx)
	}()
	defer func() { <-reporting }()
	go func() {
		// Volumes of pods deleted while the agent was down: once the
		// work present at start has been seen, then now and then.
		first := time.NewTimer(volumeSweepFirst)
		defer first.Stop()
		t := time.NewTicker(volumeSweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-first.C:
			case <-t.C:
			}
			a.sweepVolumes()
		}
	}()
	go func() {
		t := time.NewTicker(a.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := a.beat(ctx); err != nil && ctx.Err() == nil {
					a.cfg.Logger.Warn("heartbeat failed", "node", a.cfg.Node, "err", err)
				}
			}
		}
	}()
	for {
		err := a.cfg.Conn.WatchWork(ctx, func(ns, name string, data []byte, deleted bool) {
			a.work(runCtx, ns, name, data, deleted)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.cfg.Logger.Warn("watching the node's work failed; again in 1s", "node", a.cfg.Node, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (a *Agent) beat(ctx context.Context) error {
	a.mu.Lock()
	n := len(a.pods)
	a.mu.Unlock()
	pods := *resource.NewQuantity(int64(a.cfg.Pods), resource.DecimalSI)
	capacity := corev1.ResourceList{corev1.ResourceCPU: a.cfg.CPU, corev1.ResourceMemory: a.cfg.Memory, corev1.ResourcePods: pods}
	rep := podspec.Report{Node: a.cfg.Node, Labels: a.cfg.Labels, Taints: a.cfg.Taints, Capacity: capacity, Allocatable: capacity, Pods: n, Agent: "jetplane", SealKey: a.key.PublicKey().Bytes()}
	data, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return a.cfg.Conn.Beat(bctx, data)
}

// work applies one change of the node's work: a new pod starts its
// machine, a deletion (or a new incarnation under the same name) cancels
// it, a removed item forgets it once its machine ended.
func (a *Agent) work(ctx context.Context, ns, name string, data []byte, removed bool) {
	key := ns + "/" + name
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	cur := a.pods[key]
	if removed {
		if cur != nil {
			cur.silent.Store(true)
			cur.cancel()
			delete(a.pods, key)
			// The pod is finalized: its volumes go, once its machine (if
			// it still ran one) has stopped using them.
			go func() {
				<-cur.done
				a.removeVolumes(cur.uid)
			}()
		}
		return
	}
	w, err := podspec.DecodeWork(data)
	if err != nil {
		a.cfg.Logger.Warn("undecodable work item", "pod", key, "err", err)
		return
	}
	if cur != nil && cur.uid == w.UID {
		if w.Deleted {
			cur.deleted.CompareAndSwap(0, time.Now().UnixNano())
			cur.cancel()
		}
		return
	}
	if cur != nil {
		cur.cancel()
	}
	pctx, cancel := context.WithCancel(ctx)
	r := &podRunner{uid: w.UID, cancel: cancel, done: make(chan struct{})}
	a.pods[key] = r
	if w.Finished {
		// Ended for good before this agent (re)started: never run again.
		cancel()
		close(r.done)
		return
	}
	if w.Deleted {
		r.deleted.Store(time.Now().UnixNano())
		cancel()
	}
	go a.run(pctx, ctx, r, w)
}

// run drives one pod's machine to its end. pctx ends on deletion; ctx
// when the agent stops, which silences reports.
func (a *Agent) run(pctx, ctx context.Context, r *podRunner, w *podspec.Work) {
	defer close(r.done)
	defer func() {
		// A pod deleted (not an agent stopping) leaves nothing behind.
		if pctx.Err() != nil && ctx.Err() == nil {
			a.removeVolumes(w.UID)
		}
	}()
	run := NewRun(&nodeEnv{a: a}, w)
	report := func(s sm.State[*Run]) {
		if ctx.Err() != nil || r.silent.Load() {
			return
		}
		if _, ok := s.(Terminated); ok {
			if at := r.deleted.Load(); at != 0 {
				// How long stopping took, modules included: the issue's
				// "within 1 s", observable in every agent's log.
				a.cfg.Logger.Info("pod stopped: deletion requested", "pod", w.Namespace+"/"+w.Name, "took", time.Since(time.Unix(0, at)))
			}
		}
		a.reports.add(r, w, s, run)
	}
	defer func() {
		// A failure in this pod's machine or runtime is this pod's error,
		// never the process's: the pod ends in Error for good, and is
		// Terminated when deleted.
		if p := recover(); p != nil {
			a.cfg.Logger.Error("pod failed in the node agent", "pod", w.Namespace+"/"+w.Name, "panic", p, "stack", string(debug.Stack()))
			run.killAll()
			report(Error{Reason: "AgentError", Message: fmt.Sprintf("the node agent failed running this pod: %v", p), ExitCode: 128, Final: true})
			<-pctx.Done()
			report(Terminated{})
		}
	}()
	// Reports are queued, not waited for: the machine does not wait for
	// the log between states (a pod reaches Running sooner), and the
	// agent's reporter sends what is queued together.
	sm.Run(pctx, run, Start(), report)
}

// volumesDir is where the pod uid's emptyDir volumes live.
func (a *Agent) volumesDir(uid string) string {
	return filepath.Join(a.cfg.Dir, "volumes", uid)
}

// removeVolumes deletes the pod uid's emptyDir volumes (RemoveAll follows
// no symlink, and a module can make none).
func (a *Agent) removeVolumes(uid string) {
	a.mu.Lock()
	delete(a.quotas, uid)
	a.mu.Unlock()
	if !validUID(uid) {
		return
	}
	if err := os.RemoveAll(a.volumesDir(uid)); err != nil {
		a.cfg.Logger.Warn("removing a deleted pod's volumes failed", "uid", uid, "err", err)
	}
}

// How often the agent removes volumes no pod of its own holds.
const (
	volumeSweepFirst = time.Minute
	volumeSweepEvery = 10 * time.Minute
)

// sweepVolumes removes the volumes of pods the agent no longer has (they
// were deleted while it was down).
func (a *Agent) sweepVolumes() {
	entries, err := os.ReadDir(filepath.Join(a.cfg.Dir, "volumes"))
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	live := map[string]bool{}
	for _, r := range a.pods {
		live[r.uid] = true
	}
	for _, e := range entries {
		if uid := e.Name(); !live[uid] && validUID(uid) {
			delete(a.quotas, uid)
			if err := os.RemoveAll(a.volumesDir(uid)); err != nil {
				a.cfg.Logger.Warn("removing a gone pod's volumes failed", "uid", uid, "err", err)
			}
		}
	}
}

// validUID tells whether uid can name a directory: no separator, not "."
// or "..".
func validUID(uid string) bool {
	return uid != "" && uid != "." && uid != ".." && len(uid) <= 128 && !strings.ContainsAny(uid, "/\\\x00")
}

// podQuota is the quota of the pod uid's volumes together.
func (a *Agent) podQuota(uid string) *quota {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.quotas[uid]
	if q == nil {
		q = newQuota(a.cfg.MaxVolumeBytes, max(usage(a.volumesDir(uid)), 0), nil)
		a.quotas[uid] = q
	}
	return q
}

// nodeEnv is a pod's world on this node.
type nodeEnv struct{ a *Agent }

func (e *nodeEnv) Now() time.Time                         { return e.a.cfg.Clock.Now() }
func (e *nodeEnv) After(d time.Duration) <-chan time.Time { return e.a.cfg.Clock.After(d) }

// CheckSpec refuses hostPath volumes outside the node's allowed roots.
func (e *nodeEnv) CheckSpec(w *podspec.Work) error {
	if !validUID(w.UID) {
		return fmt.Errorf("metadata.uid %q cannot name the pod's volumes", w.UID)
	}
	if err := w.Open(e.a.cfg.Node, e.a.key); err != nil {
		return err
	}
	for i, v := range w.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		p := filepath.Clean(v.HostPath.Path)
		ok := false
		for _, root := range e.a.cfg.HostPathRoots {
			if rel, err := filepath.Rel(filepath.Clean(root), p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("spec.volumes[%d].hostPath.path: %s is outside the node's allowed roots %v; allow it with jetplane node --host-path-root", i, p, e.a.cfg.HostPathRoots)
		}
	}
	return nil
}

func (e *nodeEnv) imagePath(digest string) string {
	return filepath.Join(e.a.cfg.Dir, "images", strings.Replace(digest, ":", "-", 1)+".wasm")
}

// Pull resolves image and brings its module into the node's cache,
// verifying the digest of what arrived; a module that does not verify is
// never kept. Unless policy is Always, a reference the node resolved
// before to a module it still holds is not resolved again (Kubernetes'
// IfNotPresent: a tag moved since reaches this node's pods that ask
// for Always, or once the node restarts).
func (e *nodeEnv) Pull(ctx context.Context, image string, policy corev1.PullPolicy) (string, error) {
	if policy != corev1.PullAlways {
		e.a.mu.Lock()
		digest, ok := e.a.present[image]
		e.a.mu.Unlock()
		if ok {
			if _, err := os.Stat(e.imagePath(digest)); err == nil {
				return digest, nil
			}
		}
		if policy == corev1.PullNever {
			return "", fmt.Errorf("ErrImageNeverPull: image %s is not present on node %s and its imagePullPolicy is Never", image, e.a.cfg.Node)
		}
	}
	digest, err := e.pull(ctx, image)
	if err == nil {
		e.a.mu.Lock()
		e.a.present[image] = digest
		e.a.mu.Unlock()
	}
	return digest, err
}

// pull resolves image and brings its module into the node's cache.
func (e *nodeEnv) pull(ctx context.Context, image string) (string, error) {
	images := e.a.cfg.Conn.Images()
	digest, size, err := images.Resolve(ctx, image)
	if err != nil {
		return "", err
	}
	if int64(size) > e.a.cfg.MaxImageBytes {
		return "", fmt.Errorf("image %s is %d bytes, over the node's limit of %d", image, size, e.a.cfg.MaxImageBytes)
	}
	path := e.imagePath(digest)
	if _, err := os.Stat(path); err == nil {
		return digest, nil
	}
	e.a.mu.Lock()
	lock := e.a.pulls[digest]
	if lock == nil {
		lock = &sync.Mutex{}
		e.a.pulls[digest] = lock
	}
	e.a.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	if _, err := os.Stat(path); err == nil {
		return digest, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "pull-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	err = images.Fetch(ctx, digest, io.MultiWriter(tmp, h), e.a.cfg.MaxImageBytes)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return "", fmt.Errorf("image %s: digest mismatch: received %s, want %s", image, got, digest)
	}
	return digest, os.Rename(tmp.Name(), path)
}

// Start compiles (once) and instantiates container c.
func (e *nodeEnv) Start(ctx context.Context, w *podspec.Work, c *corev1.Container, digest string, restart int) (Process, error) {
	limit := podspec.MemoryLimit(c)
	if limit <= 0 {
		limit = e.a.cfg.DefaultMemoryLimit
	}
	pages := uint32(min((limit+wasmPage-1)/wasmPage, 65536))
	rt, mod, err := e.a.host.compile(ctx, digest, e.imagePath(digest), pages)
	if err != nil {
		return nil, err
	}
	s := wasmSpec{pages: pages, args: append(append([]string{c.Name}, c.Command...), c.Args...)}
	for _, ev := range c.Env {
		s.env = append(s.env, [2]string{ev.Name, ev.Value})
	}
	mounts, err := e.mounts(w, c)
	if err != nil {
		return nil, err
	}
	s.mounts = mounts
	conn := e.a.cfg.Conn
	budget := &logBudget{left: e.a.cfg.MaxLogBytes, limit: e.a.cfg.MaxLogBytes}
	stdout := &logWriter{conn: conn, ns: w.Namespace, pod: w.Name, c: c.Name, stream: "stdout", restart: restart, budget: budget}
	stderr := &logWriter{conn: conn, ns: w.Namespace, pod: w.Name, c: c.Name, stream: "stderr", restart: restart, budget: budget}
	s.stdout, s.stderr = stdout, stderr
	s.exited = func() {
		stdout.Flush()
		stderr.Flush()
		for _, m := range mounts {
			_ = m.fs.Close()
		}
	}
	return e.a.host.start(ctx, rt, mod, s), nil
}

// mounts opens container c's volumes, each a file system the module
// cannot leave (volumeFS); emptyDir volumes count against their
// sizeLimit and the pod's share of the node (MaxVolumeBytes).
func (e *nodeEnv) mounts(w *podspec.Work, c *corev1.Container) (out []mount, err error) {
	defer func() {
		if err != nil {
			for _, m := range out {
				_ = m.fs.Close()
			}
			out = nil
		}
	}()
	for _, m := range c.VolumeMounts {
		for _, v := range w.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			var (
				dir string
				q   *quota
			)
			switch {
			case v.HostPath != nil:
				dir = v.HostPath.Path
			case v.EmptyDir != nil:
				dir = filepath.Join(e.a.volumesDir(w.UID), v.Name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return out, err
				}
				limit := e.a.cfg.MaxVolumeBytes
				if sl := v.EmptyDir.SizeLimit; sl != nil && sl.Value() > 0 {
					limit = min(limit, sl.Value())
				}
				q = newQuota(limit, max(usage(dir), 0), e.a.podQuota(w.UID))
			default:
				continue
			}
			vfs, err := newVolumeFS(dir, m.ReadOnly, q)
			if err != nil {
				return out, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			out = append(out, mount{fs: vfs, guest: m.MountPath})
		}
	}
	return out, nil
}

// logFlushDelay is how long a container's output may wait to be
// published with what it writes next.
const logFlushDelay = 20 * time.Millisecond

// logWriter publishes a container's output: what is written within
// logFlushDelay (up to a chunk, events.LogChunkBytes) goes as one message,
// so a module printing line by line costs the logs stream a message per
// chunk, not per line. Flush publishes the rest; the host calls it when
// the module has exited, before its exit is reported.
type logWriter struct {
	conn               *events.NodeConn
	ns, pod, c, stream string
	restart            int
	budget             *logBudget

	mu    sync.Mutex
	buf   []byte
	timer *time.Timer
}

// logBudget is what one container start may still publish, shared by
// its stdout and stderr.
type logBudget struct {
	mu          sync.Mutex
	left, limit int64
	told        bool
}

// take returns the part of p within the budget, and the line to publish
// once when the budget ran out.
func (b *logBudget) take(p []byte) ([]byte, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if int64(len(p)) <= b.left {
		b.left -= int64(len(p))
		return p, nil
	}
	p = p[:b.left]
	b.left = 0
	if b.told {
		return p, nil
	}
	b.told = true
	return p, fmt.Appendf(nil, "\n[jetplane: this container's log limit of %d bytes is reached; the rest of its output is dropped]\n", b.limit)
}

func (l *logWriter) Write(p []byte) (int, error) {
	n := len(p)
	kept, notice := p, []byte(nil)
	if l.budget != nil {
		kept, notice = l.budget.take(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf, kept...), notice...)
	if len(kept) == 0 && len(notice) == 0 {
		return n, nil
	}
	if len(l.buf) >= events.LogChunkBytes {
		l.flushLocked()
	} else if l.timer == nil {
		l.timer = time.AfterFunc(logFlushDelay, l.Flush)
	}
	return n, nil
}

// Flush publishes what is buffered.
func (l *logWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *logWriter) flushLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if len(l.buf) == 0 {
		return
	}
	// A module must not stop because its logs cannot be sent.
	_ = l.conn.PublishLog(l.ns, l.pod, l.c, l.stream, l.restart, l.buf)
	l.buf = nil
}
