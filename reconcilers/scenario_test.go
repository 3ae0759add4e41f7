package reconcilers_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/scenario"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/memberfake"
	"github.com/jetplane/jetplane/schemas"
)

// The partition scenarios in testdata/partitions/*.txt drive several
// runtimes over an in-memory members bucket (memberfake) with a fake
// clock, a log that delivers nothing and a state that holds what the
// scenario puts in it. Commands:
//
//	join NAME...       start a runtime per name
//	stop NAME          stop it gracefully (runs finish, partitions released)
//	crash NAME         its heartbeats and bucket calls stop, then it stops
//	pause NAME         its heartbeats and bucket calls stop, its runtime goes on (SIGSTOP, or cut off)
//	resume NAME        it beats again
//	drain NAME         its shutdown begins (Runtime.Drain), its runtime not yet stopped
//	advance DURATION   move the members clock (live instances beat)
//	object NAME...     add Widget objects (taken-over partitions run them); prints nothing
//	hang NAME...       runs of these objects block until their context ends; prints nothing
//	fail-release NAME [hang|off]  NAME's releases fail (or hang, or work again)
//	runs               which instance ran which object (and which were cancelled), since the last runs,
//	                   and every run that started while another instance's run of that object was in flight
//
// Every command but runs then waits for the instances to settle and
// prints who is live, what each runtime holds and the claims.
func TestPartitionScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/partitions/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			w := newWorld(t)
			scenario.Run(t, f, w.do)
		})
	}
}

const (
	worldPartitions = 8
	worldGrace      = 100 * time.Millisecond
	worldExpiry     = 3 * time.Second
)

// world is the scenario's instances and what they share.
type world struct {
	t       *testing.T
	members *memberfake.Cluster
	objects *fakeObjects
	rec     *scenarioRec
	running map[string]*instanceRun
}

type instanceRun struct {
	rt     *reconcilers.Runtime
	cancel context.CancelFunc
	done   chan struct{}
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, members: memberfake.New(worldExpiry), objects: &fakeObjects{objs: map[projections.Key]*schemas.Object{}},
		rec: &scenarioRec{hang: map[string]bool{}, inFlight: map[string]string{}}, running: map[string]*instanceRun{}}
	t.Cleanup(func() {
		for _, r := range w.running {
			r.cancel()
			<-r.done
		}
	})
	return w
}

func (w *world) do(t *testing.T, c scenario.Cmd) string {
	switch c.Name {
	case "join":
		for _, name := range c.Args {
			w.start(t, name)
		}
	case "stop", "crash":
		name := c.Args[0]
		r := w.running[name]
		if r == nil {
			c.Fatalf(t, "%s is not running", name)
		}
		if c.Name == "crash" {
			w.members.Crash(name)
		}
		r.cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			// Grace is 100 ms, and a release is tried for at least a
			// second: a stop that takes this long slept through its
			// cancellation (a release attempt alone may take 10 s).
			c.Fatalf(t, "%s did not stop within 5 s", name)
		}
		delete(w.running, name)
	case "pause":
		w.members.Pause(c.Args[0])
	case "resume":
		w.members.Resume(c.Args[0])
	case "drain":
		r := w.running[c.Args[0]]
		if r == nil {
			c.Fatalf(t, "%s is not running", c.Args[0])
		}
		r.rt.Drain()
	case "advance":
		d, err := time.ParseDuration(c.Args[0])
		if err != nil {
			c.Fatalf(t, "%v", err)
		}
		w.members.Advance(d)
	case "object":
		for _, name := range c.Args {
			w.objects.add(name)
		}
		return ""
	case "hang":
		w.rec.mu.Lock()
		for _, name := range c.Args {
			w.rec.hang[name] = true
		}
		w.rec.mu.Unlock()
		return ""
	case "fail-release":
		mode := ""
		if len(c.Args) > 1 {
			mode = c.Args[1]
		}
		w.members.FailReleases(c.Args[0], mode != "off", mode == "hang")
	case "runs":
		return w.rec.report()
	default:
		c.Fatalf(t, "unknown command")
	}
	return w.settle()
}

func (w *world) start(t *testing.T, name string) {
	quiet := slog.New(slog.DiscardHandler)
	rt, err := reconcilers.New(reconcilers.Config{
		Log: fakeLog{}, Join: w.members.Join, State: w.objects.view(), Reconcilers: []reconcilers.Reconciler{w.rec.as(name)},
		Instance: name, Grace: worldGrace, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &instanceRun{rt: rt, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = rt.Start(ctx)
	}()
	w.running[name] = r
	eventually(t, name+" joining", func() bool { return slices.Contains(w.members.Live(), name) })
}

// settle waits until every running instance holds what the assignment
// gives it and the claims agree, or until nothing has changed for 2 s (a
// partition waiting for an expiry on the members clock, which only the
// scenario moves; every real-time wait in the runtime is shorter: grace
// 100 ms, retries 500 ms), and describes the result.
func (w *world) settle() string {
	deadline := time.Now().Add(20 * time.Second)
	last, since := "", time.Now()
	for {
		s, settled := w.describe()
		if settled || time.Now().After(deadline) {
			return s
		}
		if s != last {
			last, since = s, time.Now()
		} else if time.Since(since) > 2*time.Second {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *world) describe() (string, bool) {
	live := w.members.Live()
	assigned := reconcilers.Assign(worldPartitions, live)
	claims := w.members.Claims()
	var b strings.Builder
	fmt.Fprintf(&b, "live: %s\n", strings.Join(live, " "))
	settled := true
	held := map[int]string{}
	for _, name := range slices.Sorted(maps.Keys(w.running)) {
		ps := w.running[name].rt.Partitions()
		fmt.Fprintf(&b, "%s holds: %s\n", name, ints(ps))
		for _, p := range ps {
			held[p] = name
		}
		// An instance whose lease ended holds nothing.
		leased := w.members.Leased(name)
		for p := range worldPartitions {
			if (assigned[p] == name && leased) != slices.Contains(ps, p) {
				settled = false
			}
		}
	}
	if maps.Equal(claims, held) {
		b.WriteString("claims: as held")
	} else {
		settled = false
		by := map[string][]int{}
		for p, h := range claims {
			by[h] = append(by[h], p)
		}
		var parts []string
		for _, h := range slices.Sorted(maps.Keys(by)) {
			sort.Ints(by[h])
			parts = append(parts, h+"="+ints(by[h]))
		}
		fmt.Fprintf(&b, "claims: %s", strings.Join(parts, " "))
	}
	return b.String(), settled
}

func ints(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// fakeLog delivers nothing and takes every write.
type fakeLog struct{}

var seq atomic.Uint64

func (fakeLog) Consume(ctx context.Context, _ events.ConsumerOptions, _ func(events.Delivery)) error {
	<-ctx.Done()
	return ctx.Err()
}
func (fakeLog) Append(context.Context, events.Entry) (events.Result, error) {
	return events.Result{Sequence: seq.Add(1)}, nil
}
func (fakeLog) AppendBatch(_ context.Context, es []events.Entry) ([]events.Result, error) {
	out := make([]events.Result, len(es))
	for i := range out {
		out[i].Sequence = seq.Add(1)
	}
	return out, nil
}
func (l fakeLog) AppendAsync(ctx context.Context, es []events.Entry) ([]events.Result, []error) {
	out, _ := l.AppendBatch(ctx, es)
	return out, nil
}
func (fakeLog) LastSequence(context.Context) (uint64, error) { return 0, nil }
func (fakeLog) Partitions() int                              { return worldPartitions }
func (fakeLog) Unpin(context.Context, string, string) error  { return nil }

// fakeObjects are the objects of a scenario; each instance reads them
// through its own view (a runtime takes the view's change callback).
type fakeObjects struct {
	mu   sync.Mutex
	objs map[projections.Key]*schemas.Object
}

func (f *fakeObjects) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs[key(name)] = &schemas.Object{Kind: "Widget", Metadata: &schemas.ObjectMeta{Name: name, Namespace: "ns", Generation: 1, ResourceVersion: 1},
		Status: &schemas.Status{Goal: projections.GoalExists}}
}

func (f *fakeObjects) view() *objectView { return &objectView{f: f} }

type objectView struct{ f *fakeObjects }

func (v *objectView) Get(k projections.Key) *schemas.Object {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	return v.f.objs[k]
}

func (v *objectView) Keys(q projections.Query) ([]projections.Key, uint64) {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	var ks []projections.Key
	for k := range v.f.objs {
		if k.Kind == q.Kind {
			ks = append(ks, k)
		}
	}
	return ks, 0
}

func (v *objectView) Dependents(projections.Key) []projections.Key { return nil }
func (v *objectView) WaitFor(context.Context, uint64) error        { return nil }
func (v *objectView) OnChange(func(projections.Changed))           {}

// scenarioRec records runs by instance; runs of hung objects block until
// their context ends.
type scenarioRec struct {
	mu       sync.Mutex
	hang     map[string]bool
	runs     []string
	inFlight map[string]string // object → the instance running it
}

// report waits until no run has ended for a while, then lists the runs
// since the last report, sorted (runs in different partitions have no
// order).
func (s *scenarioRec) report() string {
	n, since := -1, time.Now()
	for time.Since(since) < 300*time.Millisecond {
		s.mu.Lock()
		if len(s.runs) != n {
			n, since = len(s.runs), time.Now()
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := slices.Sorted(slices.Values(s.runs))
	s.runs = nil
	return strings.Join(runs, "\n")
}

func (s *scenarioRec) as(instance string) reconcilers.Reconciler {
	return reconcilers.Funcs{KindList: []string{"Widget"}, ReconcileFunc: func(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
		name := obj.Metadata.Name
		s.mu.Lock()
		hang := s.hang[name]
		if other, ok := s.inFlight[name]; ok && other != instance {
			s.runs = append(s.runs, fmt.Sprintf("OVERLAP: %s started %s while %s ran it", instance, name, other))
		}
		s.inFlight[name] = instance
		s.mu.Unlock()
		what := "ran"
		if hang {
			<-ctx.Done()
			what = "ran until cancelled:"
		}
		s.mu.Lock()
		s.runs = append(s.runs, instance+" "+what+" "+name)
		if s.inFlight[name] == instance {
			delete(s.inFlight, name)
		}
		s.mu.Unlock()
		return reconcilers.Result{}, ctx.Err()
	}}
}
