package faults_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

const (
	namespace = "faults"
	keys      = 300 // objects under load
	perApply  = 20  // objects per apply request
)

// load applies changes to a fixed set of Probe objects without pause,
// each apply changing every object it carries (spec value v rises), and
// records which applies were acknowledged and which failed.
type load struct {
	clients func() []*api.Client
	mu      sync.Mutex
	next    int              // next object to change
	v       int              // last spec value handed out
	acked   map[string][]int // object → spec values acknowledged
	tried   map[string]int   // object → highest spec value attempted
	failed  map[string][]int // object → spec values whose apply failed
	// timeline of apply outcomes, for recovery times.
	outcomes []outcome
	firstErr map[string]int // distinct error messages seen, with counts
	stop     chan struct{}
	done     sync.WaitGroup
	applies  atomic.Int64
}

type outcome struct {
	at time.Time
	ok bool
}

// resume starts workers applying until halt.
func (l *load) resume(workers int) {
	l.stop = make(chan struct{})
	for w := range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for i := w; ; i += workers {
				select {
				case <-l.stop:
					return
				default:
				}
				l.once(i)
			}
		}()
	}
}

// once applies the next perApply objects through one of the clients.
func (l *load) once(i int) {
	l.mu.Lock()
	l.v++
	v := l.v
	names := make([]string, perApply)
	var sb strings.Builder
	for j := range names {
		names[j] = fmt.Sprint("o-", l.next)
		l.next = (l.next + 1) % keys
		l.tried[names[j]] = v
		fmt.Fprintf(&sb, `{"apiVersion":"v1","kind":"Probe","metadata":{"name":%q,"namespace":%q},"spec":{"v":%d}}`+"\n---\n", names[j], namespace, v)
	}
	cs := l.clients()
	l.mu.Unlock()
	c := cs[i%len(cs)]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := c.Apply(ctx, "faults", []byte(sb.String()), "")
	cancel()
	l.applies.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes = append(l.outcomes, outcome{at: time.Now(), ok: err == nil})
	if err != nil {
		msg := err.Error()
		if len(msg) > 160 {
			msg = msg[:160]
		}
		l.firstErr[msg]++
		for _, n := range names {
			l.failed[n] = append(l.failed[n], v)
		}
		time.Sleep(50 * time.Millisecond) // a refused connection fails at once
		return
	}
	for _, n := range names {
		l.acked[n] = append(l.acked[n], v)
	}
}

func (l *load) halt() {
	close(l.stop)
	l.done.Wait()
}

// ackedCount is how many object changes were acknowledged so far.
func (l *load) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, vs := range l.acked {
		n += len(vs)
	}
	return n
}

// outage is the longest run of failed applies that began at or after
// from: when it began and when the next apply succeeded (zero if no apply
// failed).
func (l *load) outage(from time.Time) (began, ended time.Time, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cur time.Time
	for _, o := range l.outcomes {
		if o.at.Before(from) {
			continue
		}
		if !o.ok {
			if cur.IsZero() {
				cur = o.at
			}
			failed++
			continue
		}
		if !cur.IsZero() {
			if ended.Sub(began) < o.at.Sub(cur) {
				began, ended = cur, o.at
			}
			cur = time.Time{}
		}
	}
	return began, ended, failed
}

func (l *load) errors() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for m, n := range l.firstErr {
		out = append(out, fmt.Sprintf("%d× %s", n, m))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// verdict is what state holds after a fault.
type verdict struct {
	acked       int      // object changes acknowledged in total
	lost        int      // acknowledged changes missing from the log
	unconverged int      // objects not Ready at their latest generation, or not at the last acknowledged (or a later tried) value
	overlaps    []string // times two instances ran one key at once, since the suite began
	converged   time.Duration
}

// check waits for every object to converge (Ready, observed = generation,
// spec at the last acknowledged value or a later attempted one), then
// reads every object's history for the acknowledged changes, and the run
// files for overlapping runs. The load must be halted.
func check(t *testing.T, c *cluster, l *load, within time.Duration) verdict {
	t.Helper()
	var v verdict
	v.acked = l.ackedCount()
	began := time.Now()
	var bad []string
	deadline := time.Now().Add(within)
	for {
		bad = unconverged(c, l)
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	v.converged = time.Since(began)
	v.unconverged = len(bad)
	if len(bad) > 0 {
		t.Errorf("%d objects did not converge within %s, such as %s", len(bad), within, strings.Join(bad[:min(5, len(bad))], "; "))
	}
	v.lost = lostAcks(t, c, l)
	v.overlaps = overlaps(t, c)
	return v
}

// anyClient calls fn with each live process's client until one answers.
func anyClient[T any](c *cluster, fn func(ctx context.Context, cl *api.Client) (T, error)) (T, error) {
	var zero T
	var err error
	for _, p := range c.procs {
		if !p.alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out T
		out, err = fn(ctx, p.client())
		cancel()
		if err == nil {
			return out, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("no process is running")
	}
	return zero, err
}

func unconverged(c *cluster, l *load) []string {
	list, err := anyClient(c, func(ctx context.Context, cl *api.Client) (*api.ListResponse, error) {
		return cl.List(ctx, api.Query{Kind: "Probe", Namespace: namespace})
	})
	if err != nil {
		return []string{"list: " + err.Error()}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	var bad []string
	for _, raw := range list.Items {
		o, err := api.DecodeObject(raw)
		if err != nil {
			return []string{err.Error()}
		}
		name := o.Metadata.Name
		if !strings.HasPrefix(name, "o-") {
			continue
		}
		seen[name] = true
		acked := l.acked[name]
		got := int(o.Spec.GetFields()["v"].GetNumberValue())
		switch {
		case !reconcilers.IsReady(o) || o.Status.ObservedGeneration != o.Metadata.Generation:
			bad = append(bad, fmt.Sprintf("%s not Ready at generation %d (observed %d)", name, o.Metadata.Generation, o.Status.ObservedGeneration))
		case len(acked) > 0 && got < acked[len(acked)-1] && !slices.Contains(l.failed[name], got):
			// An apply that failed (its process died after writing, or
			// it timed out) may have landed after a later acknowledged
			// one; anything else older is a lost change.
			bad = append(bad, fmt.Sprintf("%s at v=%d, older than the last acknowledged %d", name, got, acked[len(acked)-1]))
		case got > l.tried[name]:
			bad = append(bad, fmt.Sprintf("%s at v=%d, never applied", name, got))
		}
	}
	for name := range l.acked {
		if !seen[name] {
			bad = append(bad, name+" missing")
		}
	}
	slices.Sort(bad)
	return bad
}

// lostAcks counts acknowledged changes with no Applied event in the log.
func lostAcks(t *testing.T, c *cluster, l *load) int {
	t.Helper()
	l.mu.Lock()
	acked := make(map[string][]int, len(l.acked))
	for k, vs := range l.acked {
		acked[k] = slices.Clone(vs)
	}
	l.mu.Unlock()
	// The log itself, read once through one of the live nodes.
	nc, err := c.connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lg, err := events.Open(ctx, nc, events.Config{Replicas: c.replicas})
	if err != nil {
		t.Fatal(err)
	}
	inLog := map[string]map[int]bool{}
	err = lg.Read(ctx, events.ReadOptions{}, func(m events.Message) error {
		ev, err := m.Event()
		if err != nil {
			return err
		}
		if ev.Type != schemas.EventType_EVENT_TYPE_APPLIED || ev.Key.Kind != "Probe" || ev.Key.Namespace != namespace || ev.Object.GetSpec() == nil {
			return nil
		}
		if inLog[ev.Key.Name] == nil {
			inLog[ev.Key.Name] = map[int]bool{}
		}
		inLog[ev.Key.Name][int(ev.Object.Spec.GetFields()["v"].GetNumberValue())] = true
		return nil
	})
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	lost := 0
	for name, vs := range acked {
		for _, v := range vs {
			if !inLog[name][v] {
				lost++
				if lost <= 5 {
					t.Errorf("%s: the acknowledged change to v=%d is not in the log", name, v)
				}
			}
		}
	}
	return lost
}

// run is one recorded run of a key.
type run struct {
	instance   string
	start, end int64 // unix nanos; a run cut short by a kill ends at the kill
}

// overlaps lists, from every run file, the times two instances ran one
// key at overlapping times.
func overlaps(t *testing.T, c *cluster) []string {
	t.Helper()
	runs := map[string][]run{}
	for _, p := range c.procs {
		for i, path := range p.runs {
			cutoff := time.Now().UnixNano()
			if i < len(p.stopped) {
				cutoff = p.stopped[i].UnixNano()
			}
			readRuns(t, path, cutoff, runs)
		}
	}
	var out []string
	for key, rs := range runs {
		slices.SortFunc(rs, func(a, b run) int { return int(a.start - b.start) })
		for i := 1; i < len(rs); i++ {
			for j := range i {
				if rs[j].instance != rs[i].instance && rs[j].end > rs[i].start {
					out = append(out, fmt.Sprintf("%s ran on %s from %s to %s and on %s from %s", key, rs[j].instance,
						time.Unix(0, rs[j].start).UTC().Format("15:04:05.000"), time.Unix(0, rs[j].end).UTC().Format("15:04:05.000"),
						rs[i].instance, time.Unix(0, rs[i].start).UTC().Format("15:04:05.000")))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// readRuns parses a probe's run file; a run left open ends at cutoff.
func readRuns(t *testing.T, path string, cutoff int64, into map[string][]run) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]run{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		at, _ := strconv.ParseInt(f[4], 10, 64)
		switch f[0] {
		case "start":
			open[f[2]] = run{instance: f[1], start: at}
		case "end", "cancel":
			// A cancelled run made no side effect after the time it
			// gives (see the probe).
			r := open[f[2]]
			delete(open, f[2])
			r.end = at
			into[f[2]] = append(into[f[2]], r)
		}
	}
	for key, r := range open {
		r.end = cutoff
		into[key] = append(into[key], r)
	}
}
