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
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// Appender writes to the log.
type Appender interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
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
	// Log reads keys' versions; it appends only when Door is nil.
	Log   Appender
	State Waiter
	// Door, when set, is how node's reports are appended: the gate's way
	// in for that node's principal, which authorizes each status again.
	Door func(node string) StatusAppender
	Now  func() time.Time
}

// StatusAppender appends a node's reports.
type StatusAppender interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

// appender is node's way into the log.
func (s *StatusService) appender(node string) StatusAppender {
	if s.Door != nil {
		return s.Door(node)
	}
	return s.Log
}

// Errors a report can be refused with, for good (they wrap
// events.ErrReportRefused).
var (
	ErrNotBound = fmt.Errorf("%w: pod is not bound to this node", events.ErrReportRefused)
	ErrGone     = fmt.Errorf("%w: pod no longer exists", events.ErrReportRefused)
)

// Handle records one report from node (the request's data) and returns
// the reply.
func (s *StatusService) Handle(ctx context.Context, node string, data []byte) ([]byte, error) {
	ev := new(schemas.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: undecodable report: %v", events.ErrReportRefused, err)
	}
	st := ev.GetObject().GetStatus()
	if ev.GetKey().GetKind() != podspec.KindPod || st == nil {
		return nil, fmt.Errorf("%w: a report names a Pod and carries its status", events.ErrReportRefused)
	}
	k := projections.KeyOf(ev.Key)
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	for attempt := 0; attempt < 8; attempt++ {
		pod := s.State.Get(k)
		if refusal(pod, node, ev) != nil {
			// This instance's projection may be behind the one that
			// handed the pod to the node: look again once it has caught
			// up with the pod's last event.
			if err := s.catchUp(ctx, ev.Key); err != nil {
				return nil, err
			}
			pod = s.State.Get(k)
		}
		if err := refusal(pod, node, ev); err != nil {
			return nil, err
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
		_, err := s.appender(node).Append(ctx, events.Entry{Event: out, Expect: pod.GetMetadata().GetResourceVersion()})
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

// HandleBatch records a batch of reports from node, in order, and returns
// one error per report (nil when recorded). Reports of different pods are
// written together: one pipelined round of appends takes the next report
// of every pod in the batch, each checked against the pod's last version
// (the projection's for a pod's first, the previous append's for the
// rest), so a batch costs as many round trips as one pod has reports in
// it, not as many as there are reports. A pod whose write conflicts (it
// changed meanwhile) goes on one report at a time against fresh state, as
// Handle does; a report that could not be written fails the pod's later
// ones too, so the agent sends them again in order.
func (s *StatusService) HandleBatch(ctx context.Context, node string, reports [][]byte) []error {
	errs := make([]error, len(reports))
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	byKey := map[projections.Key]*chain{}
	var chains []*chain
	for i, data := range reports {
		ev := new(schemas.Event)
		if err := proto.Unmarshal(data, ev); err != nil {
			errs[i] = fmt.Errorf("%w: undecodable report: %v", events.ErrReportRefused, err)
			continue
		}
		if ev.GetKey().GetKind() != podspec.KindPod || ev.GetObject().GetStatus() == nil {
			errs[i] = fmt.Errorf("%w: a report names a Pod and carries its status", events.ErrReportRefused)
			continue
		}
		k := projections.KeyOf(ev.Key)
		c := byKey[k]
		if c == nil {
			c = &chain{key: k}
			byKey[k] = c
			chains = append(chains, c)
		}
		c.idx, c.evs = append(c.idx, i), append(c.evs, ev)
	}
	// slow records c's reports from the next on, one at a time.
	slow := func(c *chain) {
		for j := c.next; j < len(c.idx); j++ {
			data, _ := proto.Marshal(c.evs[j])
			if _, err := s.Handle(ctx, node, data); err != nil {
				errs[c.idx[j]] = err
				c.fail(j+1, errs)
				break
			}
		}
		c.next = len(c.idx)
	}
	log := s.appender(node)
	live := chains[:0]
	for _, c := range chains {
		pod := s.State.Get(c.key)
		refused := func() bool {
			for _, ev := range c.evs {
				if refusal(pod, node, ev) != nil {
					return true
				}
			}
			return false
		}
		if refused() {
			// Behind the instance that handed the pod over? (See Handle.)
			if err := s.catchUp(ctx, c.evs[0].Key); err != nil {
				for _, i := range c.idx {
					errs[i] = err
				}
				continue
			}
			pod = s.State.Get(c.key)
		}
		for j, ev := range c.evs {
			errs[c.idx[j]] = refusal(pod, node, ev)
		}
		if pod == nil || pod.GetSpec().GetFields()["nodeName"].GetStringValue() != node {
			continue
		}
		c.rv, c.prev, c.goal = pod.GetMetadata().GetResourceVersion(), pod.GetStatus(), pod.GetStatus().GetGoal()
		live = append(live, c)
	}
	for len(live) > 0 {
		var entries []events.Entry
		var writing []*chain
		for _, c := range live {
			for ; c.next < len(c.idx); c.next++ {
				if errs[c.idx[c.next]] != nil {
					continue // an earlier incarnation's
				}
				// The batch decoded the event and owns it: its status is
				// written as is, with the goal and stamps set (slow, and
				// Handle in it, set both again from fresh state).
				next := c.evs[c.next].GetObject().GetStatus()
				next.Goal = c.goal
				stamp(next, c.prev, now())
				if proto.Equal(next, c.prev) {
					continue // nothing new
				}
				c.write = next
				entries = append(entries, events.Entry{Expect: c.rv, Event: &schemas.Event{
					Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: c.evs[c.next].Key, Actor: "node/" + node,
					Time: timestamppb.New(now()), Object: &schemas.Object{Status: next},
				}})
				writing = append(writing, c)
				break
			}
		}
		if len(entries) == 0 {
			break
		}
		results, werrs := log.AppendAsync(ctx, entries)
		live = live[:0]
		for i, c := range writing {
			var err error
			if werrs != nil {
				err = werrs[i]
			}
			switch {
			case err == nil:
				c.rv, c.prev = results[i].Sequence, c.write
				c.next++
				live = append(live, c)
			case errors.Is(err, events.ErrConflict):
				// The pod changed meanwhile: go on against fresh state.
				slow(c)
			default:
				errs[c.idx[c.next]] = err
				c.fail(c.next+1, errs)
			}
		}
	}
	return errs
}

// errEarlierFailed fails the reports that follow one not recorded.
var errEarlierFailed = errors.New("an earlier report of the pod was not recorded; send both again")

// chain is one pod's reports in a batch.
type chain struct {
	key   projections.Key
	idx   []int // the reports' places in the batch, in order
	evs   []*schemas.Event
	next  int // the next report to write
	rv    uint64
	prev  *schemas.Status
	goal  string
	write *schemas.Status // the status in flight
}

// fail marks the chain's reports from j on as not recorded.
func (c *chain) fail(j int, errs []error) {
	for ; j < len(c.idx); j++ {
		if errs[c.idx[j]] == nil {
			errs[c.idx[j]] = errEarlierFailed
		}
	}
	c.next = len(c.idx)
}

// refusal is why a report of ev from node cannot be recorded on pod, for
// good (nil when it can).
func refusal(pod *schemas.Object, node string, ev *schemas.Event) error {
	switch {
	case pod == nil:
		return ErrGone
	case pod.GetMetadata().GetUid() != ev.GetObject().GetMetadata().GetUid():
		return fmt.Errorf("%w: the report is of an earlier incarnation", ErrGone)
	case pod.GetSpec().GetFields()["nodeName"].GetStringValue() != node:
		return ErrNotBound
	}
	return nil
}

// catchUp waits until the projection has folded the last event of key
// the log holds.
func (s *StatusService) catchUp(ctx context.Context, key *schemas.ObjectKey) error {
	v, err := s.Log.KeyVersion(ctx, key)
	if err != nil {
		return err
	}
	return s.State.WaitFor(ctx, v)
}
