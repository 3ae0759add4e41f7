package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// StateLister lists the objects of one kind in the state as of a log
// sequence. The CLI reads it through the API (`state --at`); a process
// holding the log folds it itself (LogStates).
type StateLister func(ctx context.Context, at uint64, kind string) ([]*schemas.Object, error)

// ErrNotBound is returned for a pod whose history holds no Bound event.
var ErrNotBound = errors.New("has not been bound to a node")

// LastBound returns the last Bound event of a pod's history and the
// decision it recorded.
func LastBound(evs []*schemas.Event) (*schemas.Event, *RecordedDecision, error) {
	var bound *schemas.Event
	for _, ev := range evs {
		if ev.Type == schemas.EventType_EVENT_TYPE_BOUND {
			bound = ev
		}
	}
	if bound == nil {
		return nil, nil, ErrNotBound
	}
	rec, err := ParseRecord(bound.Detail)
	if err != nil {
		return nil, nil, fmt.Errorf("Bound event %d: %w", bound.Sequence, err)
	}
	return bound, rec, nil
}

// ReplayBound re-runs the decision that bound pod namespace/name, on the
// states list reads: the snapshot the decision saw, the state right after
// the Bound event (where its assumed pods are bound) and the pod as it was
// just before.
func ReplayBound(ctx context.Context, list StateLister, namespace, name string, bound *schemas.Event, rec *RecordedDecision, profiles map[string]*Profile) (*Decision, error) {
	in := ReplayInput{Recorded: rec, Profiles: profiles}
	var err error
	if in.NodesAtSnap, err = list(ctx, rec.SnapshotSequence, "Node"); err != nil {
		return nil, err
	}
	if in.PodsAtSnap, err = list(ctx, rec.SnapshotSequence, "Pod"); err != nil {
		return nil, err
	}
	if in.PodsAtBound, err = list(ctx, bound.Sequence, "Pod"); err != nil {
		return nil, err
	}
	before, err := list(ctx, bound.Sequence-1, "Pod")
	if err != nil {
		return nil, err
	}
	for _, o := range before {
		if o.GetMetadata().GetNamespace() == namespace && o.GetMetadata().GetName() == name {
			in.Pod = o
		}
	}
	if in.Pod == nil {
		return nil, errors.New("the pod is missing from the state before its Bound event")
	}
	return Replay(ctx, in)
}

// LogStates lists from the log itself, folding the state at each sequence
// asked for.
func LogStates(l projections.Log) StateLister {
	return func(ctx context.Context, at uint64, kind string) ([]*schemas.Object, error) {
		st, err := projections.StateAt(ctx, l, nil, at)
		if err != nil {
			return nil, err
		}
		objs, _ := st.List(projections.Query{Kind: kind})
		return objs, nil
	}
}

// ReplayFromLog reads pod key's last Bound event from the log and replays
// it there: what `jetplane placement --replay` does through the API.
func ReplayFromLog(ctx context.Context, l *events.Log, key projections.Key, profiles map[string]*Profile) (*RecordedDecision, *Decision, error) {
	evs, err := l.History(ctx, key.Proto())
	if err != nil {
		return nil, nil, err
	}
	bound, rec, err := LastBound(evs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %w", key, err)
	}
	d, err := ReplayBound(ctx, LogStates(l), key.Namespace, key.Name, bound, rec, profiles)
	return rec, d, err
}
