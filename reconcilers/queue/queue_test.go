package queue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newQueue(t *testing.T, cfg Config) *Queue {
	t.Helper()
	if cfg.Jitter == nil {
		cfg.Jitter = func() float64 { return 0 }
	}
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// drain hands out every key due at now, in order.
func drain(q *Queue, now time.Time) []string {
	var out []string
	for {
		k, ok := q.Next(now)
		if !ok {
			return out
		}
		out = append(out, k)
	}
}

func done(t *testing.T, q *Queue, key string, r Result, now time.Time) time.Time {
	t.Helper()
	at, err := q.Done(key, r, now)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestDedupeWhileWaiting(t *testing.T) {
	q := newQueue(t, Config{})
	for range 5 {
		q.Add("a")
	}
	q.Add("b")
	q.Add("a")
	if got := fmt.Sprint(drain(q, t0)); got != "[a b]" {
		t.Fatalf("handed out %s, want [a b]: a waiting key is queued once", got)
	}
	if s := q.Stats(); s.Ready != 0 || s.Running != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestOneMoreRunWhileRunning(t *testing.T) {
	q := newQueue(t, Config{})
	q.Add("a")
	k, _ := q.Next(t0)
	// Events while it runs: however many, one more run.
	q.Add("a")
	q.Add("a")
	q.Add("a")
	if _, ok := q.Next(t0); ok {
		t.Fatal("a key ran twice at once")
	}
	if at := done(t, q, k, Result{}, t0); !at.Equal(t0) {
		t.Fatalf("next run at %v, want now (one more run)", at)
	}
	if got := fmt.Sprint(drain(q, t0)); got != "[a]" {
		t.Fatalf("after the run: %s, want exactly one more [a]", got)
	}
	done(t, q, "a", Result{}, t0)
	if got := drain(q, t0); len(got) != 0 {
		t.Fatalf("a third run %v; events during a run cause exactly one more", got)
	}
}

func TestNeverConcurrentAndMaxRunning(t *testing.T) {
	q := newQueue(t, Config{MaxRunning: 2})
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k)
	}
	if got := fmt.Sprint(drain(q, t0)); got != "[a b]" {
		t.Fatalf("with MaxRunning 2 handed out %s", got)
	}
	q.Add("a")
	done(t, q, "b", Result{}, t0)
	// c was waiting longer than a's re-add: FIFO.
	if got := fmt.Sprint(drain(q, t0)); got != "[c]" {
		t.Fatalf("got %s, want [c] (a still runs)", got)
	}
	done(t, q, "a", Result{}, t0)
	if got := fmt.Sprint(drain(q, t0)); got != "[a]" {
		t.Fatalf("got %s, want [a]", got)
	}
}

func TestBackoffDoublesCapsAndResets(t *testing.T) {
	q := newQueue(t, Config{BaseDelay: 5 * time.Millisecond, MaxDelay: 40 * time.Millisecond, Resync: -1})
	q.Add("a")
	now := t0
	var delays []time.Duration
	for range 6 {
		k, ok := q.Next(now)
		if !ok {
			t.Fatalf("a not due at %v (wake %v)", now, q.NextWake())
		}
		at := done(t, q, k, Result{Outcome: Failed}, now)
		delays = append(delays, at.Sub(now))
		if _, ok := q.Next(at.Add(-time.Nanosecond)); ok {
			t.Fatal("a ran before its backoff ended")
		}
		if !q.NextWake().Equal(at) {
			t.Fatalf("NextWake %v, want %v", q.NextWake(), at)
		}
		now = at
	}
	if got := fmt.Sprint(delays); got != "[5ms 10ms 20ms 40ms 40ms 40ms]" {
		t.Fatalf("backoff delays %s", got)
	}
	k, _ := q.Next(now)
	if at := done(t, q, k, Result{}, now); !at.IsZero() {
		t.Fatalf("success with resync off scheduled %v", at)
	}
	q.Add("a")
	k, _ = q.Next(now)
	if at := done(t, q, k, Result{Outcome: Failed}, now); at.Sub(now) != 5*time.Millisecond {
		t.Fatalf("first failure after a success waits %s, want 5ms (reset)", at.Sub(now))
	}
}

func TestBackoffJitter(t *testing.T) {
	q := newQueue(t, Config{Jitter: func() float64 { return 0.999 }})
	for n, want := range map[int]time.Duration{1: 5 * time.Millisecond, 10: 2560 * time.Millisecond, 40: 1000 * time.Second} {
		got := q.Backoff(n)
		if got > want || got < want/2 {
			t.Errorf("Backoff(%d) = %s, want within [%s, %s]", n, got, want/2, want)
		}
	}
}

func TestTerminalWaitsForChange(t *testing.T) {
	q := newQueue(t, Config{})
	q.Add("a")
	k, _ := q.Next(t0)
	if at := done(t, q, k, Result{Outcome: FailedTerminal}, t0); !at.IsZero() {
		t.Fatalf("terminal error scheduled a retry at %v", at)
	}
	if got := drain(q, t0.Add(24*time.Hour)); len(got) != 0 || !q.NextWake().IsZero() {
		t.Fatalf("terminal key ran again without a change: %v", got)
	}
	q.Add("a") // the object changed
	if got := fmt.Sprint(drain(q, t0)); got != "[a]" {
		t.Fatalf("after a change: %s", got)
	}
}

func TestRequeueAfterAndResync(t *testing.T) {
	q := newQueue(t, Config{Resync: 10 * time.Minute})
	q.Add("a")
	q.Add("b")
	drain(q, t0)
	if at := done(t, q, "a", Result{RequeueAfter: 30 * time.Second}, t0); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("requeue-after: next run %v", at)
	}
	if at := done(t, q, "b", Result{}, t0); !at.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("resync: next run %v, want in 10m", at)
	}
	if got := drain(q, t0.Add(29*time.Second)); len(got) != 0 {
		t.Fatalf("ran early: %v", got)
	}
	if got := fmt.Sprint(drain(q, t0.Add(30*time.Second))); got != "[a]" {
		t.Fatalf("at 30s: %s", got)
	}
	if got := fmt.Sprint(drain(q, t0.Add(10*time.Minute))); got != "[b]" {
		t.Fatalf("at 10m: %s", got)
	}
	// A change supersedes a scheduled resync: it runs now.
	done(t, q, "b", Result{}, t0.Add(10*time.Minute))
	q.Add("b")
	if got := fmt.Sprint(drain(q, t0.Add(10*time.Minute))); got != "[b]" {
		t.Fatalf("change during a scheduled resync: %s", got)
	}
}

func TestResyncJitterSpreadsKeys(t *testing.T) {
	vals := []float64{0, 0.5, 0.999}
	i := 0
	q := newQueue(t, Config{Resync: 10 * time.Minute, Jitter: func() float64 { v := vals[i%3]; i++; return v }})
	var ats []time.Duration
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k)
		drain(q, t0)
		ats = append(ats, done(t, q, k, Result{}, t0).Sub(t0))
	}
	if ats[0] == ats[1] || ats[1] == ats[2] || ats[2] < 9*time.Minute {
		t.Fatalf("resync delays %v: want spread within the last tenth of the period", ats)
	}
}

func TestConflictRerunsAtOnceWithoutBackoff(t *testing.T) {
	q := newQueue(t, Config{})
	q.Add("a")
	drain(q, t0)
	if at := done(t, q, "a", Result{Outcome: Conflicted}, t0); !at.Equal(t0) {
		t.Fatalf("conflict: next run %v, want now", at)
	}
	drain(q, t0)
	if at := done(t, q, "a", Result{Outcome: Failed}, t0); at.Sub(t0) != 5*time.Millisecond {
		t.Fatalf("a conflict counted as a failure: backoff %s", at.Sub(t0))
	}
}

func TestForget(t *testing.T) {
	q := newQueue(t, Config{})
	q.Add("a")
	q.Add("b")
	q.Forget("a")
	if got := fmt.Sprint(drain(q, t0)); got != "[b]" {
		t.Fatalf("forgotten key handed out: %s", got)
	}
	// Forgotten while running: dropped when done, nothing scheduled.
	q.Forget("b")
	if at := done(t, q, "b", Result{}, t0); !at.IsZero() || q.NextWake() != (time.Time{}) {
		t.Fatalf("forgotten running key scheduled at %v", at)
	}
	if _, err := q.Done("b", Result{}, t0); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Done twice: err = %v, want ErrNotRunning", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{MaxRunning: -1}, {BaseDelay: time.Second, MaxDelay: time.Millisecond}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// TestNoTriggerLost drives random adds, runs and outcomes and checks two
// invariants against a model: a key is never handed out while it runs, and
// every add is followed by a run that started after it.
func TestNoTriggerLost(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		q := newQueue(t, Config{MaxRunning: 3, Resync: -1})
		keys := []string{"a", "b", "c", "d", "e"}
		running := map[string]bool{}
		owed := map[string]bool{} // added since the key's last run started
		now := t0
		for step := range 2000 {
			switch r.IntN(4) {
			case 0:
				k := keys[r.IntN(len(keys))]
				q.Add(k)
				owed[k] = true
			case 1:
				if k, ok := q.Next(now); ok {
					if running[k] {
						t.Fatalf("seed %d step %d: %s handed out while running", seed, step, k)
					}
					running[k] = true
					owed[k] = false
				}
			case 2:
				for k := range running {
					outcome := []Outcome{Succeeded, Failed, Conflicted}[r.IntN(3)]
					done(t, q, k, Result{Outcome: outcome}, now)
					delete(running, k)
					break
				}
			case 3:
				// The object left current state: its adds are moot.
				k := keys[r.IntN(len(keys))]
				q.Forget(k)
				owed[k] = false
			}
			// The constant-time counts agree with the entries.
			want := Stats{Scheduled: len(q.timers), Running: len(running)}
			for _, e := range q.entries {
				if e.state == ready {
					want.Ready++
				}
			}
			if got := q.Stats(); got != want {
				t.Fatalf("seed %d step %d: stats %+v, entries say %+v", seed, step, got, want)
			}
			now = now.Add(time.Millisecond)
		}
		// Finish: complete every run successfully, advancing time past any
		// backoff, until nothing is left.
		for range 10000 {
			for k := range running {
				done(t, q, k, Result{}, now)
				delete(running, k)
			}
			k, ok := q.Next(now)
			if !ok {
				if q.NextWake().IsZero() {
					break
				}
				now = q.NextWake()
				continue
			}
			running[k] = true
			owed[k] = false
		}
		for k, o := range owed {
			if o {
				t.Fatalf("seed %d: an add of %s was never followed by a run", seed, k)
			}
		}
	}
}

// A parked key frees its slot but stays running: it is not handed out
// again before Done, and a change meanwhile runs it once more after.
func TestParkFreesASlotButNotTheKey(t *testing.T) {
	q := newQueue(t, Config{MaxRunning: 1})
	q.Add("a")
	q.Add("b")
	if got := drain(q, t0); fmt.Sprint(got) != "[a]" {
		t.Fatalf("handed out %v, want [a] (one slot)", got)
	}
	if err := q.Park("a"); err != nil {
		t.Fatal(err)
	}
	if err := q.Park("a"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("parking twice: %v", err)
	}
	q.Add("a") // changed while its status is recorded
	if got := drain(q, t0); fmt.Sprint(got) != "[b]" {
		t.Fatalf("handed out %v, want [b]: the slot is free, a still runs", got)
	}
	if s := q.Stats(); s.Running != 1 {
		t.Fatalf("running = %d, want 1 (b; a is parked)", s.Running)
	}
	done(t, q, "a", Result{}, t0)
	done(t, q, "b", Result{}, t0)
	if got := drain(q, t0); fmt.Sprint(got) != "[a]" {
		t.Fatalf("after Done handed out %v, want a once more", got)
	}
}
