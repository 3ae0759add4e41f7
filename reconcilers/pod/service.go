package pod

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod/podspec"
	"github.com/jetplane/jetplane/schemas"
)

// Appender writes to the log.
type Appender interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	KeyVersion(ctx context.Context, k *schemas.ObjectKey) (uint64, error)
}

// Waiter is the projection, read after a write conflicted.
type Waiter interface {
	State
	WaitFor(ctx context.Context, seq uint64) error
}

// StatusService records node agents' pod status reports: it checks that
// the pod exists, is bound to the reporting node and is the incarnation
// the agent runs, then appends StatusChanged (actor node/<node>) with
// optimistic concurrency, retrying on conflict against fresh state.
type StatusService struct {
	Log   Appender
	State Waiter
	Now   func() time.Time
}

// Errors a report can be refused with.
var (
	ErrNotBound = errors.New("pod is not bound to this node")
	ErrGone     = errors.New("pod no longer exists")
)

// Handle records one report from node (the request's data) and returns
// the reply.
func (s *StatusService) Handle(ctx context.Context, node string, data []byte) ([]byte, error) {
	ev := new(schemas.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("undecodable report: %w", err)
	}
	st := ev.GetObject().GetStatus()
	if ev.GetKey().GetKind() != podspec.KindPod || st == nil {
		return nil, errors.New("a report names a Pod and carries its status")
	}
	k := projections.KeyOf(ev.Key)
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	for attempt := 0; attempt < 8; attempt++ {
		pod := s.State.Get(k)
		switch {
		case pod == nil:
			return nil, ErrGone
		case pod.GetMetadata().GetUid() != ev.GetObject().GetMetadata().GetUid():
			return nil, fmt.Errorf("%w: the report is of an earlier incarnation", ErrGone)
		case pod.GetSpec().GetFields()["nodeName"].GetStringValue() != node:
			return nil, ErrNotBound
		}
		next := proto.CloneOf(st)
		next.Goal = pod.GetStatus().GetGoal()
		stamp(next, pod.GetStatus(), now())
		if proto.Equal(next, pod.GetStatus()) {
			return []byte("ok"), nil
		}
		out := &schemas.Event{
			Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: ev.Key, Actor: "node/" + node,
			Time: timestamppb.New(now()), Object: &schemas.Object{Status: next},
		}
		_, err := s.Log.Append(ctx, events.Entry{Event: out, Expect: pod.GetMetadata().GetResourceVersion()})
		if !errors.Is(err, events.ErrConflict) {
			if err != nil {
				return nil, err
			}
			return []byte("ok"), nil
		}
		v, err := s.Log.KeyVersion(ctx, ev.Key)
		if err != nil {
			return nil, err
		}
		if err := s.State.WaitFor(ctx, v); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("the pod kept changing; report again")
}
