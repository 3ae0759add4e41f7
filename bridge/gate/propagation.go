package gate

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Propagation is what deleting an owner does to its dependents (the
// objects whose owner annotation names it): Kubernetes' DeleteOptions
// propagationPolicy, with its values (decision 0071).
type Propagation = metav1.DeletionPropagation

// Propagation policies: Background deletes the owner at once and its
// dependents after it (the default); Foreground keeps the owner, with its
// deletionTimestamp and the foregroundDeletion finalizer, until its
// dependents are gone; Orphan deletes the owner alone, its dependents lose
// their owner and stay.
const (
	Background = metav1.DeletePropagationBackground
	Foreground = metav1.DeletePropagationForeground
	Orphan     = metav1.DeletePropagationOrphan
)

// The finalizers the DeleteRequested event of a Foreground or Orphan
// deletion adds to the owner, with Kubernetes' names; the owner's
// controller reads them when it finalizes.
const (
	FinalizerForeground = metav1.FinalizerDeleteDependents
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
)

// ParsePropagation reads a policy as a Kubernetes client or jetplane's CLI
// spells it ("Foreground", "foreground"); "" is Background.
func ParsePropagation(s string) (Propagation, error) {
	switch s {
	case "", "Background", "background":
		return Background, nil
	case "Foreground", "foreground":
		return Foreground, nil
	case "Orphan", "orphan":
		return Orphan, nil
	}
	return "", invalid("propagation policy %q: use Background, Foreground or Orphan", s)
}

func checkPropagation(p Propagation) error {
	_, err := ParsePropagation(string(p))
	return err
}

// propagationFinalizer is the finalizer a deletion with policy p adds to
// the owner, if any.
func propagationFinalizer(p Propagation) string {
	switch p {
	case Foreground:
		return FinalizerForeground
	case Orphan:
		return FinalizerOrphan
	}
	return ""
}

// Release clears the owner annotation of k for the controller p acting
// for k's owner, when that owner is deleted with the Orphan policy: k
// stays, without an owner. It records that its former owner may adopt it
// (AnnotationAllowAdoption), so an owner recreated under the same name
// takes its dependents back, as Kubernetes' controllers adopt orphans. An
// object being deleted is left as it is (Unchanged).
func (g *Gate) Release(ctx context.Context, p Principal, k projections.Key) (Outcome, error) {
	for attempt := 1; ; attempt++ {
		out, err := g.releaseOnce(ctx, p, k)
		if !errors.Is(err, events.ErrConflict) || attempt == maxAttempts {
			return out, err
		}
		if err := g.catchUp(ctx); err != nil {
			return Outcome{}, err
		}
	}
}

func (g *Gate) releaseOnce(ctx context.Context, p Principal, k projections.Key) (Outcome, error) {
	cur := g.cfg.State.Get(k)
	if cur == nil {
		return Outcome{}, fmt.Errorf("%s: %w", k, ErrNotFound)
	}
	if p.Role != RoleController {
		return Outcome{}, forbid(p, "release %s: only its owner's controller releases an object", k)
	}
	if err := Authorize(p, VerbApply, target(k, cur)); err != nil {
		return Outcome{}, err
	}
	if cur.GetStatus().GetGoal() == projections.GoalDeleted {
		return Outcome{Key: k, Action: Unchanged, Object: cur}, nil
	}
	next := proto.CloneOf(cur)
	next.Status = nil
	next.Metadata.ResourceVersion = 0
	ann := next.Metadata.Annotations
	delete(ann, AnnotationOwner)
	ann[AnnotationAllowAdoption] = p.Owner
	ev := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k.Proto(), Object: next, Actor: p.Name, Time: timestamppb.New(g.cfg.Now())}
	last, _, err := g.write(ctx, []events.Entry{{Event: ev, Expect: cur.GetMetadata().GetResourceVersion()}})
	if err != nil {
		return Outcome{}, err
	}
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return Outcome{}, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	return Outcome{Key: k, Action: Configured, Object: g.cfg.State.Get(k), Previous: cur}, nil
}
