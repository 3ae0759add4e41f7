package pod

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// fakeClock is a clock only the test moves.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeTimer{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// NextTimer is how far ahead the earliest pending timer is.
func (c *fakeClock) NextTimer(t *testing.T) time.Duration {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		if len(c.waiters) > 0 {
			d := c.waiters[0].at.Sub(c.now)
			for _, w := range c.waiters[1:] {
				d = min(d, w.at.Sub(c.now))
			}
			c.mu.Unlock()
			return d
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the machine set no timer")
		}
		time.Sleep(time.Millisecond)
	}
}

type fakeProc struct {
	done   chan struct{}
	exit   Exit
	once   sync.Once
	killed bool
}

func newProc() *fakeProc { return &fakeProc{done: make(chan struct{})} }

func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Exit() Exit            { return p.exit }
func (p *fakeProc) end(e Exit)            { p.once.Do(func() { p.exit = e; close(p.done) }) }
func (p *fakeProc) Kill() {
	p.once.Do(func() { p.killed = true; p.exit = Exit{Code: 137, Reason: "Killed"}; close(p.done) })
}

// fakeEnv scripts the world: images that exist, and what each start does.
type fakeEnv struct {
	*fakeClock
	mu       sync.Mutex
	images   map[string]string // ref → digest
	start    func(restart int) (*fakeProc, error)
	procs    []*fakeProc
	specErr  error
	pullErrs int
}

func (e *fakeEnv) CheckSpec(*podspec.Work) error { return e.specErr }

func (e *fakeEnv) Pull(_ context.Context, image string, _ corev1.PullPolicy) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.images[image]
	if !ok {
		e.pullErrs++
		return "", errors.New("image " + image + " not found")
	}
	return d, nil
}

func (e *fakeEnv) Start(_ context.Context, _ *podspec.Work, _ *corev1.Container, _ string, restart int) (Process, error) {
	p, err := e.start(restart)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

func (e *fakeEnv) push(ref, digest string) {
	e.mu.Lock()
	e.images[ref] = digest
	e.mu.Unlock()
}

type entered struct {
	name   string
	status *schemas.Status
}

// machine runs a pod on env in the background and hands over each state
// entered with its status.
type machine struct {
	t      *testing.T
	states chan entered
	cancel context.CancelFunc
	done   chan struct{}
}

func work(policy corev1.RestartPolicy) *podspec.Work {
	return &podspec.Work{Namespace: "ns", Name: "p", Generation: 1, Spec: corev1.PodSpec{
		RestartPolicy: policy,
		Containers:    []corev1.Container{{Name: "main", Image: "hello:v1"}},
	}}
}

func startMachine(t *testing.T, env *fakeEnv, w *podspec.Work) *machine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &machine{t: t, states: make(chan entered, 64), cancel: cancel, done: make(chan struct{})}
	r := NewRun(env, w)
	go func() {
		defer close(m.done)
		sm.Run(ctx, r, Start(), func(s sm.State[*Run]) {
			m.states <- entered{name: sm.Name(s), status: Entered(s, r)}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-m.done
	})
	return m
}

// expect reads the next states entered and checks their names.
func (m *machine) expect(names ...string) []entered {
	m.t.Helper()
	var got []entered
	for _, want := range names {
		select {
		case e := <-m.states:
			got = append(got, e)
			if e.name != want {
				m.t.Fatalf("entered %s, want %s (so far %v)", e.name, want, namesOf(got))
			}
		case <-time.After(5 * time.Second):
			m.t.Fatalf("no state after %v; want %s", namesOf(got), want)
		}
	}
	return got
}

func namesOf(es []entered) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

func exitWith(code int32) func(int) (*fakeProc, error) {
	return func(int) (*fakeProc, error) {
		p := newProc()
		p.end(Exit{Code: code})
		return p, nil
	}
}

func newEnv() *fakeEnv {
	return &fakeEnv{fakeClock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, images: map[string]string{"hello:v1": "sha256:aa"}}
}

func TestExitZeroCompletesAndDeletionTerminates(t *testing.T) {
	env := newEnv()
	env.start = exitWith(0)
	m := startMachine(t, env, work(corev1.RestartPolicyNever))
	got := m.expect("Registered", "ImagePull", "Starting", "Running", "Completed")
	ps, err := PodStatus(got[4].status)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Phase != corev1.PodSucceeded || ps.ContainerStatuses[0].State.Terminated.ExitCode != 0 || ps.ContainerStatuses[0].ImageID != "sha256:aa" {
		t.Fatalf("completed status %+v", ps)
	}
	if r := got[3].status.Conditions[0]; r.Status != "True" {
		t.Fatalf("running is not Ready: %v", r)
	}
	m.cancel()
	m.expect("Terminated")
}

func TestCrashLoopDoublesTheBackoff(t *testing.T) {
	env := newEnv()
	env.start = exitWith(1)
	m := startMachine(t, env, work(corev1.RestartPolicyOnFailure))
	m.expect("Registered", "ImagePull", "Starting", "Running", "Error")
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second} {
		got := m.expect("CrashLoopBackoff")
		ps, _ := PodStatus(got[0].status)
		if !strings.Contains(got[0].status.Message, "back-off "+want.String()) || ps.Reason != "CrashLoopBackOff" {
			t.Fatalf("backoff %d: %q, want %s", i, got[0].status.Message, want)
		}
		if d := env.NextTimer(t); d != want {
			t.Fatalf("backoff %d waits %s, want %s", i, d, want)
		}
		env.Advance(want)
		got = m.expect("Starting", "Running", "Error")
		ps, _ = PodStatus(got[2].status)
		cs := ps.ContainerStatuses[0]
		if cs.RestartCount != int32(i+1) || cs.State.Terminated.ExitCode != 1 || ps.Phase != corev1.PodRunning {
			t.Fatalf("after restart %d: %+v", i+1, ps)
		}
	}
}

func TestBackoffResetsAfterTenMinutesRunning(t *testing.T) {
	env := newEnv()
	var mu sync.Mutex
	var live *fakeProc
	env.start = func(restart int) (*fakeProc, error) {
		mu.Lock()
		defer mu.Unlock()
		live = newProc()
		return live, nil
	}
	m := startMachine(t, env, work(corev1.RestartPolicyAlways))
	crash := func(after time.Duration) {
		m.expect("Running")
		env.Advance(after)
		mu.Lock()
		live.end(Exit{Code: 3})
		mu.Unlock()
		m.expect("Error")
	}
	m.expect("Registered", "ImagePull", "Starting")
	crash(time.Second)
	m.expect("CrashLoopBackoff")
	env.Advance(env.NextTimer(t))
	m.expect("Starting")
	crash(time.Second)
	got := m.expect("CrashLoopBackoff")
	if !strings.Contains(got[0].status.Message, "back-off 20s") {
		t.Fatalf("second backoff %q", got[0].status.Message)
	}
	env.Advance(env.NextTimer(t))
	m.expect("Starting")
	crash(BackoffReset)
	got = m.expect("CrashLoopBackoff")
	if !strings.Contains(got[0].status.Message, "back-off 10s") {
		t.Fatalf("after ten minutes running the backoff is %q, want 10s again", got[0].status.Message)
	}
}

func TestMissingImageBacksOffThenRuns(t *testing.T) {
	env := newEnv()
	env.images = map[string]string{}
	env.start = func(int) (*fakeProc, error) { return newProc(), nil }
	m := startMachine(t, env, work(corev1.RestartPolicyNever))
	got := m.expect("Registered", "ImagePull", "ImagePullBackoff")
	if !strings.Contains(got[2].status.Message, "not found") || !strings.Contains(got[2].status.Message, "retry in 10s") {
		t.Fatalf("backoff status %q", got[2].status.Message)
	}
	env.Advance(env.NextTimer(t))
	m.expect("ImagePull", "ImagePullBackoff")
	if d := env.NextTimer(t); d != 20*time.Second {
		t.Fatalf("second pull backoff %s", d)
	}
	env.push("hello:v1", "sha256:bb")
	env.Advance(20 * time.Second)
	m.expect("ImagePull", "Starting", "Running")
}

func TestDeletionStopsARunningModule(t *testing.T) {
	env := newEnv()
	env.start = func(int) (*fakeProc, error) { return newProc(), nil }
	m := startMachine(t, env, work(corev1.RestartPolicyAlways))
	m.expect("Registered", "ImagePull", "Starting", "Running")
	m.cancel()
	got := m.expect("Terminated")
	if !env.procs[0].killed {
		t.Fatal("the module was not killed")
	}
	if ps, _ := PodStatus(got[0].status); ps.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("terminated status %+v", ps)
	}
}

func TestDeadlineEndsThePodForGood(t *testing.T) {
	env := newEnv()
	env.start = func(int) (*fakeProc, error) { return newProc(), nil }
	w := work(corev1.RestartPolicyAlways)
	secs := int64(30)
	w.Spec.ActiveDeadlineSeconds = &secs
	m := startMachine(t, env, w)
	m.expect("Registered", "ImagePull", "Starting", "Running")
	// The machine reports Running before it sets the deadline's timer:
	// moving the clock before that would only push the deadline on.
	if d := env.NextTimer(t); d > 30*time.Second {
		t.Fatalf("the first timer is %s ahead, want the deadline within 30s", d)
	}
	env.Advance(30 * time.Second)
	got := m.expect("Error")
	ps, _ := PodStatus(got[0].status)
	if ps.Reason != "DeadlineExceeded" || ps.Phase != corev1.PodFailed {
		t.Fatalf("deadline status %+v", ps)
	}
	if !env.procs[0].killed {
		t.Fatal("the module outlived the deadline")
	}
	m.cancel()
	m.expect("Terminated")
}

func TestCompletedRestartsUnderAlways(t *testing.T) {
	env := newEnv()
	env.start = exitWith(0)
	m := startMachine(t, env, work(corev1.RestartPolicyAlways))
	m.expect("Registered", "ImagePull", "Starting", "Running", "Completed", "CrashLoopBackoff")
}

func TestNeverPolicyStaysInError(t *testing.T) {
	env := newEnv()
	env.start = exitWith(2)
	m := startMachine(t, env, work(corev1.RestartPolicyNever))
	got := m.expect("Registered", "ImagePull", "Starting", "Running", "Error")
	ps, _ := PodStatus(got[4].status)
	if ps.Phase != corev1.PodFailed || ps.ContainerStatuses[0].State.Terminated.ExitCode != 2 {
		t.Fatalf("error status %+v", ps)
	}
	select {
	case e := <-m.states:
		t.Fatalf("Never restarted: entered %s", e.name)
	case <-time.After(50 * time.Millisecond):
	}
	m.cancel()
	m.expect("Terminated")
}

func TestNothingRunsWhatTheNodeRefuses(t *testing.T) {
	tests := []struct {
		name   string
		env    func(*fakeEnv)
		want   []string
		reason string
	}{
		{"volume outside the allowed roots", func(e *fakeEnv) {
			e.specErr = errors.New("spec.volumes[0].hostPath.path: /etc is outside the node's allowed roots")
		}, []string{"Registered", "Error"}, "InvalidSpec"},
		{"not a module", func(e *fakeEnv) {
			e.start = func(int) (*fakeProc, error) { return nil, errors.New("invalid magic number") }
		}, []string{"Registered", "ImagePull", "Starting", "Error"}, "CreateContainerError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv()
			env.start = func(int) (*fakeProc, error) { t.Error("started"); return newProc(), nil }
			tt.env(env)
			m := startMachine(t, env, work(corev1.RestartPolicyAlways))
			got := m.expect(tt.want...)
			ps, _ := PodStatus(got[len(got)-1].status)
			if ps.Reason != tt.reason || ps.Phase != corev1.PodFailed {
				t.Fatalf("status %+v", ps)
			}
			select {
			case e := <-m.states:
				t.Fatalf("went on to %s", e.name)
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}
