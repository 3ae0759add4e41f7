package kube

import (
	"context"
	"errors"
	"sync"
	"time"
)

// State is where a cluster's bridge stands.
type State string

const (
	// StateConnecting: not synced since the bridge started; LastError says
	// what stands in the way, if anything does.
	StateConnecting State = "connecting"
	// StateSynced: every resource was listed, objects deleted while the
	// bridge was away are recorded as gone, and changes are flowing.
	StateSynced State = "synced"
	// StateError: synced once, but listing, watching or appending fails
	// now; the bridge keeps retrying.
	StateError State = "error"
)

// Status is a snapshot of one cluster's bridge.
type Status struct {
	Name  string
	State State
	// Synced is whether the cluster has synced since the bridge started;
	// it stays true through later errors.
	Synced    bool
	Resources []ResourceStatus
	// Objects is how many objects the bridge's caches hold.
	Objects int
	// LastEvent is when an event was last appended (zero: never).
	LastEvent time.Time
	// LastError is the latest failure and when it happened; it is kept
	// after recovery, as a hint.
	LastError     string
	LastErrorTime time.Time
	// Appended counts events stored; Duplicates events the log already
	// held (another bridge stored them first); Dropped events that could
	// not be stored at all (objects too large for the log).
	Appended, Duplicates, Dropped uint64
	// Relists counts full lists after the first one (a 410 Gone, a restart
	// of the apiserver); Gone counts the 410 answers among them.
	Relists, Gone uint64
	// Queue is how many events wait to be appended.
	Queue int
}

// ResourceStatus is one watched resource of a cluster.
type ResourceStatus struct {
	// Resource is as configured, such as "deployments.v1.apps in shop".
	Resource string
	// Kind is the kind (with group) as keys name it, once discovery found it.
	Kind    string
	Synced  bool
	Objects int
}

// tracker records one cluster's state; safe for concurrent use.
type tracker struct {
	mu            sync.Mutex
	synced        bool
	watchFailing  bool
	appendFailing bool
	lastEvent     time.Time
	lastError     string
	lastErrorTime time.Time
	appendedN     uint64
	duplicates    uint64
	droppedN      uint64
	gone          uint64
	now           func() time.Time
}

// failed records err; the cluster is failing until the same side succeeds.
func (t *tracker) failed(err error, watchSide bool) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed = t.lastError != err.Error()
	if watchSide {
		changed = changed || !t.watchFailing
		t.watchFailing = true
	} else {
		changed = changed || !t.appendFailing
		t.appendFailing = true
	}
	t.lastError, t.lastErrorTime = err.Error(), t.now()
	return changed
}

// watchOK records a successful list or watch; it reports whether the
// cluster was failing.
func (t *tracker) watchOK() (recovered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	recovered = t.watchFailing
	t.watchFailing = false
	return recovered
}

func (t *tracker) appendFailed(err error) { t.failed(err, false) }

func (t *tracker) appended(stored, dups int) {
	if stored+dups == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.appendFailing = false
	t.appendedN += uint64(stored)
	t.duplicates += uint64(dups)
	t.lastEvent = t.now()
}

func (t *tracker) dropped(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.droppedN++
	t.lastError, t.lastErrorTime = err.Error(), t.now()
}

func (t *tracker) sawGone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gone++
}

func (t *tracker) setSynced() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.synced = true
}

func (t *tracker) fill(s *Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Synced = t.synced
	switch {
	case !t.synced:
		s.State = StateConnecting
	case t.watchFailing || t.appendFailing:
		s.State = StateError
	default:
		s.State = StateSynced
	}
	s.LastEvent, s.LastError, s.LastErrorTime = t.lastEvent, t.lastError, t.lastErrorTime
	s.Appended, s.Duplicates, s.Dropped, s.Gone = t.appendedN, t.duplicates, t.droppedN, t.gone
}

// isShutdown reports errors that only mean the bridge is stopping.
func isShutdown(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
