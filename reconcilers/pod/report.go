package pod

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// report is one status to send.
type report struct {
	r   *podRunner
	w   *podspec.Work
	pod string // namespace/name
	st  *schemas.Status
	// details, when set, is what st's Details are built from when the
	// report is sent (enteredStatus); nil when st has them.
	details *corev1.PodStatus
	// state is the machine's state the status reports; passed, the
	// states a report of it stands for too (coalesce).
	state   string
	passing bool
	passed  []string
	at      time.Time // when the pod entered the state
}

// reporter sends the agent's status reports, in the order the pods
// entered their states, every report queued while a request is in flight
// going in the next one: under load a request carries many pods' states,
// and an instance records them together (StatusService.HandleBatch). A
// report not recorded is sent again, with its pod's later ones behind it,
// after a backoff growing to reportBackoffMax, for as long as the agent
// runs: a node never stops telling what its pods do. Only a refusal (the
// pod is gone or bound elsewhere) or the pod's work item going away
// (it was finalized) drops a report. A report of a state the pod left
// while the report waited goes in the pod's next report (coalesce), and
// a pod's report of a state it will likely leave at once waits a moment
// for the next (take): a pod with a cached image starts in one event
// (decision 0089).
type reporter struct {
	a    *Agent
	mu   sync.Mutex
	q    []report
	wake chan struct{}
}

// Report batching bounds: at most maxReports per request; a failed
// request is sent again after reportBackoffMin, doubling to
// reportBackoffMax.
const (
	maxReports       = 256
	reportBackoffMin = 100 * time.Millisecond
	reportBackoffMax = 5 * time.Second
	reportTimeout    = 10 * time.Second
)

func (rp *reporter) add(r *podRunner, w *podspec.Work, state sm.State[*Run], run *Run) {
	st, ps := enteredStatus(state, run)
	rp.mu.Lock()
	rp.q = append(rp.q, report{r: r, w: w, pod: w.Namespace + "/" + w.Name, st: st, details: ps, state: sm.Name(state), passing: passing(state), at: time.Now()})
	rp.mu.Unlock()
	select {
	case rp.wake <- struct{}{}:
	default:
	}
}

// passing tells the states a pod's machine leaves without waiting for
// anything outside the node (with its image cached, within a
// millisecond): a report of one that is still queued behind a later
// report of the same pod says nothing the later one does not.
func passing(state sm.State[*Run]) bool {
	switch state.(type) {
	case Registered, ImagePull, Starting:
		return true
	}
	return false
}

// coalesce drops from q (in the order the pods entered their states)
// each report of a passing state that a later report of the same pod
// run follows, and names the dropped state in that later report's
// passed list (earliest first), which its status records (ConditionPassed).
// Reports of different pods, and of states that wait or end, are all
// kept. q is reused.
func coalesce(q []report) []report {
	later := map[*podRunner]int{} // runner → index in q of its next kept report
	keep := make([]bool, len(q))
	for i := len(q) - 1; i >= 0; i-- {
		rep := &q[i]
		if j, ok := later[rep.r]; ok && rep.passing {
			q[j].passed = append(append(append([]string(nil), rep.passed...), rep.state), q[j].passed...)
			continue
		}
		keep[i] = true
		later[rep.r] = i
	}
	out := q[:0]
	for i, k := range keep {
		if k {
			out = append(out, q[i])
		}
	}
	return out
}

// withPassed is the status to send: the one reported, with the states
// it stands for too (ConditionPassed) first among its conditions. The
// queued status gets its details, built here once; nothing else of it
// changes.
func (rep *report) withPassed() *schemas.Status {
	if rep.details != nil && rep.st.Details == nil {
		// Built once (st is shared by the report's copies; the
		// reporter's goroutine alone sends).
		rep.st.Details = details(rep.details)
	}
	if len(rep.passed) == 0 {
		return rep.st
	}
	// A copy of the status but for its details, which it shares: they
	// are only read once built, and copying them was most of the copy.
	d := rep.st.Details
	rep.st.Details = nil
	st := proto.CloneOf(rep.st)
	rep.st.Details, st.Details = d, d
	passed := &schemas.Condition{Type: ConditionPassed, Status: "True", Reason: "Coalesced", Message: strings.Join(rep.passed, ", ")}
	st.Conditions = append([]*schemas.Condition{passed}, st.Conditions...)
	return st
}

// encode is the report's event as an instance takes it.
func (rep *report) encode() ([]byte, error) {
	return proto.Marshal(&schemas.Event{
		Key:    &schemas.ObjectKey{Kind: podspec.KindPod, Namespace: rep.w.Namespace, Name: rep.w.Name},
		Object: &schemas.Object{Metadata: &schemas.ObjectMeta{Uid: rep.w.UID}, Status: rep.withPassed()},
	})
}

// run sends reports until ctx ends.
func (rp *reporter) run(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-rp.wake:
		}
		for {
			rp.mu.Lock()
			// Reports of finalized pods are no longer wanted; a state
			// the pod has left already goes with the next.
			q := rp.q[:0]
			for _, rep := range rp.q {
				if !rep.r.silent.Load() {
					q = append(q, rep)
				}
			}
			batch, rest, wait := take(coalesce(q), time.Now(), maxReports)
			rp.q = rest
			rp.mu.Unlock()
			if len(batch) == 0 {
				if wait == 0 {
					break
				}
				// Only states just entered that the pods will likely
				// leave at once: wait for them, or for a new report.
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				case <-rp.wake:
					t.Stop()
				}
				continue
			}
			retry := rp.send(ctx, batch)
			rp.mu.Lock()
			rp.q = append(retry, rp.q...)
			rp.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			if len(retry) == 0 {
				backoff = 0
				continue
			}
			backoff = min(max(2*backoff, reportBackoffMin), reportBackoffMax)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

// reportLinger is how long a report of a passing state waits to be sent
// when it is its pod's last: long enough for a pod whose image is
// cached to reach Running (a module's start takes a few milliseconds),
// so that one event records its start; short enough that a pod that
// stays (pulling a large image, compiling a new module) shows so at once
// to a person watching.
const reportLinger = 10 * time.Millisecond

// take splits q (coalesced) into the reports to send now, at most max
// in their order, and the rest: reports of passing states entered less
// than reportLinger before now wait (wait is the soonest one's time
// left; 0 when none waits). A waiting report is the last of its pod
// (coalesce), so holding it back never sends a pod's reports out of
// order.
func take(q []report, now time.Time, max int) (batch, rest []report, wait time.Duration) {
	rest = q[:0:0]
	for _, rep := range q {
		if len(batch) < max {
			if d := reportLinger - now.Sub(rep.at); !rep.passing || d <= 0 {
				batch = append(batch, rep)
				continue
			} else if wait == 0 || d < wait {
				wait = d
			}
		}
		rest = append(rest, rep)
	}
	return batch, rest, wait
}

// send sends batch and returns the reports to send again, in order.
func (rp *reporter) send(ctx context.Context, batch []report) (retry []report) {
	data := make([][]byte, 0, len(batch))
	sent := batch[:0:0]
	for _, rep := range batch {
		b, err := rep.encode()
		if err != nil {
			rp.a.cfg.Logger.Error("encode status", "pod", rep.pod, "err", err)
			continue
		}
		data, sent = append(data, b), append(sent, rep)
	}
	batch = sent
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	errs, err := rp.a.cfg.Conn.ReportStatuses(rctx, data)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			rp.a.cfg.Logger.Warn("pod statuses not recorded; sending again", "reports", len(batch), "err", err)
		}
		return batch
	}
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, events.ErrReportRefused):
			// The pod is gone or bound elsewhere: saying it again will not help.
			rp.a.cfg.Logger.Debug("pod status refused", "pod", batch[i].pod, "err", err)
		default:
			rp.a.cfg.Logger.Warn("pod status not recorded; sending again", "pod", batch[i].pod, "err", err)
			retry = append(retry, batch[i])
		}
	}
	return retry
}
