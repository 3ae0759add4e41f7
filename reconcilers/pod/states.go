package pod

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// The pod's states. Each is a value: what it carries is what its status
// reports.
type (
	// Registered: the agent has the pod and checks what only the node can
	// (volume paths against the roots it allows).
	Registered struct{}
	// ImagePull fetches every container's module into the node's cache
	// and verifies its digest.
	ImagePull struct{}
	// ImagePullBackoff waits before pulling again.
	ImagePullBackoff struct {
		Reason, Message string
		Delay           time.Duration
	}
	// Starting compiles (once per digest) and instantiates the modules.
	Starting struct{}
	// Running waits for the modules to exit, the deadline, or deletion.
	Running struct{ Since time.Time }
	// Completed: every container exited 0.
	Completed struct{}
	// Error: a container failed (exit code, trap, memory, deadline) or the
	// pod cannot run on this node at all.
	Error struct {
		Reason, Message string
		ExitCode        int32
		// Final errors are never restarted (a deadline, a spec the node
		// refuses).
		Final bool
	}
	// CrashLoopBackoff waits before starting the containers again.
	CrashLoopBackoff struct{ Delay time.Duration }
	// Terminated: deletion stopped the pod. Final.
	Terminated struct{}
)

// edges are the pod machine's transitions; next is the only way a handler
// moves, so an edge not named here does not build. docs/pods.md is
// rendered from this declaration (TestGraphDocIsCurrent).
type edges interface {
	sm.Edge[Registered, ImagePull] |
		sm.Edge[Registered, Error] |
		sm.Edge[ImagePull, Starting] |
		sm.Edge[ImagePull, ImagePullBackoff] |
		sm.Edge[ImagePullBackoff, ImagePull] |
		sm.Edge[Starting, Running] |
		sm.Edge[Starting, Error] |
		sm.Edge[Running, Completed] |
		sm.Edge[Running, Error] |
		sm.Edge[Completed, CrashLoopBackoff] |
		sm.Edge[Error, CrashLoopBackoff] |
		sm.Edge[CrashLoopBackoff, Starting] |
		sm.Edge[CrashLoopBackoff, Error] |
		sm.Edge[Registered, Terminated] |
		sm.Edge[ImagePull, Terminated] |
		sm.Edge[ImagePullBackoff, Terminated] |
		sm.Edge[Starting, Terminated] |
		sm.Edge[Running, Terminated] |
		sm.Edge[Completed, Terminated] |
		sm.Edge[Error, Terminated] |
		sm.Edge[CrashLoopBackoff, Terminated]
	sm.Transition
}

func next[E edges](e E) sm.Step[*Run] { return sm.Go[*Run](e) }

// Backoff bounds: 10 s doubling to 300 s, reset after 10 min running.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 300 * time.Second
	BackoffReset   = 10 * time.Minute
)

// Exit is how a container ended.
type Exit struct {
	Code int32
	// Reason is empty for a plain exit; else OOMKilled, Trap, Killed.
	Reason  string
	Message string
}

// Process is a running container.
type Process interface {
	// Done is closed when the module has exited.
	Done() <-chan struct{}
	// Exit is how it ended; valid after Done.
	Exit() Exit
	// Kill stops the module (through its context) and waits for it.
	Kill()
}

// Env is the world a pod's machine acts on: the node's clock, its image
// cache and its WebAssembly runtime. The agent gives each pod one; tests
// give a fake.
type Env interface {
	Now() time.Time
	// After fires once d has passed on the node's clock.
	After(d time.Duration) <-chan time.Time
	// CheckSpec reports what the node refuses in the pod (a hostPath
	// outside its allowed roots), nil when it can run it.
	CheckSpec(w *podspec.Work) error
	// Pull brings image into the node's cache, verified, and returns its
	// digest. policy is Kubernetes' imagePullPolicy, defaulted
	// (PullPolicy): IfNotPresent takes the digest the node resolved the
	// same reference to before, when that module is still cached,
	// without asking the image store; Never only that; Always resolves
	// the reference every time.
	Pull(ctx context.Context, image string, policy corev1.PullPolicy) (digest string, err error)
	// Start instantiates container c of the pod, run restart times before.
	Start(ctx context.Context, w *podspec.Work, c *corev1.Container, digest string, restart int) (Process, error)
}

// Run is one pod on one node: the machine's subject. Handlers own it; it
// is not safe for concurrent use.
type Run struct {
	Env  Env
	Work *podspec.Work

	Restarts  int
	Digests   map[string]string // container → digest
	Started   time.Time         // when the node took the pod (deadline origin)
	LastStart time.Time
	Exits     map[string]Exit // container → last exit
	Backoff   time.Duration   // the next crash-loop delay
	pullDelay time.Duration
	procs     map[string]Process
}

// NewRun starts a pod's bookkeeping.
func NewRun(env Env, w *podspec.Work) *Run {
	return &Run{Env: env, Work: w, Digests: map[string]string{}, Exits: map[string]Exit{}, Started: env.Now()}
}

func (r *Run) policy() corev1.RestartPolicy {
	if p := r.Work.Spec.RestartPolicy; p != "" {
		return p
	}
	return corev1.RestartPolicyAlways
}

// deadline is when activeDeadlineSeconds runs out (zero: never).
func (r *Run) deadline() time.Time {
	if d := r.Work.Spec.ActiveDeadlineSeconds; d != nil {
		return r.Started.Add(time.Duration(*d) * time.Second)
	}
	return time.Time{}
}

// timer fires at the deadline; nil (never fires) without one.
func (r *Run) timer() <-chan time.Time {
	dl := r.deadline()
	if dl.IsZero() {
		return nil
	}
	return r.Env.After(max(dl.Sub(r.Env.Now()), 0))
}

func nextDelay(d time.Duration) time.Duration {
	if d == 0 {
		return BackoffInitial
	}
	return min(2*d, BackoffMax)
}

func (s Registered) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	if ctx.Err() != nil {
		return next(sm.Move(s, Terminated{}))
	}
	if err := r.Env.CheckSpec(r.Work); err != nil {
		return next(sm.Move(s, Error{Reason: "InvalidSpec", Message: err.Error(), Final: true}))
	}
	return next(sm.Move(s, ImagePull{}))
}

func (s ImagePull) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	for i := range r.Work.Spec.Containers {
		c := &r.Work.Spec.Containers[i]
		d, err := r.Env.Pull(ctx, c.Image, PullPolicy(c))
		if ctx.Err() != nil {
			return next(sm.Move(s, Terminated{}))
		}
		if err != nil {
			r.pullDelay = nextDelay(r.pullDelay)
			return next(sm.Move(s, ImagePullBackoff{Reason: "ImagePullBackOff", Message: fmt.Sprintf("container %s: %v", c.Name, err), Delay: r.pullDelay}))
		}
		r.Digests[c.Name] = d
	}
	r.pullDelay = 0
	return next(sm.Move(s, Starting{}))
}

// PullPolicy is container c's imagePullPolicy, defaulted as Kubernetes
// defaults it: Always for a tag "latest", IfNotPresent otherwise (a
// digest names one module forever).
func PullPolicy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if _, tag, _, err := podspec.ParseImageRef(c.Image); err == nil && tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func (s ImagePullBackoff) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	select {
	case <-ctx.Done():
		return next(sm.Move(s, Terminated{}))
	case <-r.Env.After(s.Delay):
		return next(sm.Move(s, ImagePull{}))
	}
}

func (s Starting) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	r.procs = map[string]Process{}
	for i := range r.Work.Spec.Containers {
		c := &r.Work.Spec.Containers[i]
		p, err := r.Env.Start(ctx, r.Work, c, r.Digests[c.Name], r.Restarts)
		if ctx.Err() != nil {
			r.killAll()
			return next(sm.Move(s, Terminated{}))
		}
		if err != nil {
			r.killAll()
			ex := Exit{Code: 128, Reason: "CreateContainerError", Message: fmt.Sprintf("container %s: %v", c.Name, err)}
			r.Exits[c.Name] = ex
			return next(sm.Move(s, Error{Reason: ex.Reason, Message: ex.Message, ExitCode: ex.Code, Final: true}))
		}
		r.procs[c.Name] = p
	}
	r.LastStart = r.Env.Now()
	return next(sm.Move(s, Running{Since: r.LastStart}))
}

func (r *Run) killAll() {
	for _, p := range r.procs {
		p.Kill()
	}
}

func (s Running) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	deadline := r.timer()
	for name, p := range r.procs {
		select {
		case <-p.Done():
			r.Exits[name] = p.Exit()
		case <-ctx.Done():
			r.killAll()
			return next(sm.Move(s, Terminated{}))
		case <-deadline:
			r.killAll()
			return next(sm.Move(s, Error{Reason: "DeadlineExceeded", Message: fmt.Sprintf("the pod ran past its activeDeadlineSeconds (%ds)", *r.Work.Spec.ActiveDeadlineSeconds), ExitCode: 137, Final: true}))
		}
	}
	if r.Env.Now().Sub(s.Since) >= BackoffReset {
		r.Backoff = 0
	}
	// The first failing container, in spec order, names the error.
	for _, c := range r.Work.Spec.Containers {
		if ex := r.Exits[c.Name]; ex.Code != 0 || ex.Reason != "" {
			reason := ex.Reason
			if reason == "" {
				reason = "Error"
			}
			return next(sm.Move(s, Error{Reason: reason, Message: fmt.Sprintf("container %s: %s", c.Name, exitText(ex)), ExitCode: ex.Code}))
		}
	}
	return next(sm.Move(s, Completed{}))
}

func exitText(ex Exit) string {
	msg := fmt.Sprintf("exit code %d", ex.Code)
	if ex.Message != "" {
		msg += ": " + ex.Message
	}
	return msg
}

func (s Completed) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	if r.policy() == corev1.RestartPolicyAlways && ctx.Err() == nil {
		r.Backoff = nextDelay(r.Backoff)
		return next(sm.Move(s, CrashLoopBackoff{Delay: r.Backoff}))
	}
	<-ctx.Done()
	return next(sm.Move(s, Terminated{}))
}

func (s Error) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	if !s.Final && r.policy() != corev1.RestartPolicyNever && ctx.Err() == nil {
		r.Backoff = nextDelay(r.Backoff)
		return next(sm.Move(s, CrashLoopBackoff{Delay: r.Backoff}))
	}
	<-ctx.Done()
	return next(sm.Move(s, Terminated{}))
}

func (s CrashLoopBackoff) Handle(ctx context.Context, r *Run) sm.Step[*Run] {
	select {
	case <-ctx.Done():
		return next(sm.Move(s, Terminated{}))
	case <-r.timer():
		return next(sm.Move(s, Error{Reason: "DeadlineExceeded", Message: fmt.Sprintf("the pod ran past its activeDeadlineSeconds (%ds)", *r.Work.Spec.ActiveDeadlineSeconds), ExitCode: 137, Final: true}))
	case <-r.Env.After(s.Delay):
		r.Restarts++
		return next(sm.Move(s, Starting{}))
	}
}

func (Terminated) Handle(context.Context, *Run) sm.Step[*Run] { return sm.Done[*Run]() }

// Start is the machine's first state.
func Start() sm.State[*Run] { return Registered{} }
