package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Handle is what the scheduler offers its plugins beyond a cycle's
// arguments, as kube-scheduler's framework.Handle: the waiting pods of
// Permit, an event recorder and the scheduler's logger.
type Handle interface {
	// GetWaitingPod returns the pod with uid waiting on Permit, or nil.
	GetWaitingPod(uid types.UID) *v1.Pod
	// RejectWaitingPod rejects the waiting pod with uid; it reports
	// whether such a pod was waiting.
	RejectWaitingPod(uid types.UID) bool
	// Eventf records an event about regarding (and related, when set).
	Eventf(regarding, related *v1.ObjectReference, eventtype, reason, action, note string)
	// Logger is the scheduler's logger.
	Logger() *slog.Logger
}

// HandleUser is a plugin that needs the Handle; the Scheduler sets it
// before any cycle.
type HandleUser interface {
	SetHandle(h Handle)
}

// NopHandle is the Handle of a plugin used outside a Scheduler (a replay,
// a test): nothing waits, events are logged.
type NopHandle struct{ Log *slog.Logger }

// GetWaitingPod implements Handle.
func (NopHandle) GetWaitingPod(types.UID) *v1.Pod { return nil }

// RejectWaitingPod implements Handle.
func (NopHandle) RejectWaitingPod(types.UID) bool { return false }

// Eventf implements Handle.
func (h NopHandle) Eventf(regarding, _ *v1.ObjectReference, eventtype, reason, action, note string) {
	h.Logger().Info("scheduler: event", "regarding", regarding.Namespace+"/"+regarding.Name, "type", eventtype, "reason", reason, "action", action, "note", note)
}

// Logger implements Handle.
func (h NopHandle) Logger() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

// waitingPods are the pods Permit made wait, by uid.
type waitingPods struct {
	mu   sync.Mutex
	pods map[types.UID]*waitingPod
}

type waitingPod struct {
	pod *v1.Pod
	// done receives the outcome once: nil allowed, else the rejection.
	done chan *Status
}

func (w *waitingPods) add(pod *v1.Pod) *waitingPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods == nil {
		w.pods = map[types.UID]*waitingPod{}
	}
	wp := &waitingPod{pod: pod, done: make(chan *Status, 1)}
	w.pods[pod.UID] = wp
	return wp
}

func (w *waitingPods) get(uid types.UID) *waitingPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods[uid]
}

// finish ends uid's wait with st; false when it was not waiting.
func (w *waitingPods) finish(uid types.UID, st *Status) bool {
	w.mu.Lock()
	wp := w.pods[uid]
	delete(w.pods, uid)
	w.mu.Unlock()
	if wp == nil {
		return false
	}
	wp.done <- st
	return true
}

// wait blocks until the pod is allowed or rejected, or timeout passes
// (a rejection, as in kube-scheduler).
func (w *waitingPods) wait(ctx context.Context, wp *waitingPod, timeout time.Duration, plugin string) *Status {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case st := <-wp.done:
		return st
	case <-t.C:
		if w.finish(wp.pod.UID, nil) {
			<-wp.done
		} else {
			return <-wp.done
		}
		return &Status{Code: Unschedulable, Plugin: plugin, Reasons: []string{"rejected due to timeout after waiting " + timeout.String() + " at plugin " + plugin}}
	case <-ctx.Done():
		w.finish(wp.pod.UID, nil)
		return AsStatus(ctx.Err())
	}
}

// schedHandle is the Scheduler's Handle.
type schedHandle struct {
	s *Scheduler
}

func (h schedHandle) GetWaitingPod(uid types.UID) *v1.Pod {
	if wp := h.s.waiting.get(uid); wp != nil {
		return wp.pod
	}
	return nil
}

func (h schedHandle) RejectWaitingPod(uid types.UID) bool {
	return h.s.waiting.finish(uid, &Status{Code: Unschedulable, Reasons: []string{"removed from the waiting pods"}})
}

// AllowWaitingPod lets the waiting pod with uid go on to binding; it
// reports whether such a pod was waiting.
func (s *Scheduler) AllowWaitingPod(uid types.UID) bool { return s.waiting.finish(uid, nil) }

func (h schedHandle) Eventf(regarding, related *v1.ObjectReference, eventtype, reason, action, note string) {
	args := []any{"regarding", regarding.Kind + "/" + regarding.Namespace + "/" + regarding.Name, "type", eventtype, "reason", reason, "action", action, "note", note}
	if related != nil && related.Name != "" {
		args = append(args, "related", related.Kind+"/"+related.Namespace+"/"+related.Name)
	}
	h.s.cfg.Logger.Info("scheduler: event", args...)
}

func (h schedHandle) Logger() *slog.Logger { return h.s.cfg.Logger }

var (
	_ Handle = schedHandle{}
	_ Handle = NopHandle{}
)
