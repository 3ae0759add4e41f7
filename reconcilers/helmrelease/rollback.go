package helmrelease

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Revision returns the HelmRelease as it was applied at revision n (its
// generation n), read from the release's history: what `jetplane rollback
// --to-revision n` applies again. Only what a person writes is kept
// (apiVersion, kind, name, namespace, labels, annotations, group,
// dependsOn, spec), so applying it makes a new revision with revision n's
// chart and values. The chart itself is found again by name and version:
// pushed versions never change (events.ErrExists). It carries
// AnnotationRollback: the release writes revision n's objects as stored.
func Revision(history []*schemas.Event, n int64) (*schemas.Object, error) {
	var found *schemas.Object
	var revs []int64
	for _, ev := range history {
		o := ev.GetObject()
		if ev.GetType() != schemas.EventType_EVENT_TYPE_APPLIED || o == nil {
			continue
		}
		g := o.GetMetadata().GetGeneration()
		if len(revs) == 0 || revs[len(revs)-1] != g {
			revs = append(revs, g)
		}
		if g == n {
			found = o
		}
	}
	if found == nil {
		return nil, fmt.Errorf("revision %d is not in the release's history (revisions: %v)", n, revs)
	}
	if found.GetKind() != Kind {
		return nil, fmt.Errorf("%s is not a %s", found.GetKind(), Kind)
	}
	md := found.GetMetadata()
	// The release re-applies what revision n wrote and runs its rollback
	// hooks (AnnotationRollback); a test request of revision n is not
	// made again.
	ann := map[string]string{}
	for k, v := range md.GetAnnotations() {
		if k != AnnotationTest && !strings.HasPrefix(k, gatePrefix) {
			ann[k] = v
		}
	}
	ann[AnnotationRollback] = strconv.FormatInt(n, 10)
	return &schemas.Object{
		ApiVersion: found.GetApiVersion(),
		Kind:       found.GetKind(),
		Metadata: &schemas.ObjectMeta{
			Name: md.GetName(), Namespace: md.GetNamespace(), Labels: md.GetLabels(), Annotations: ann,
			Group: md.GetGroup(), DependsOn: md.GetDependsOn(),
		},
		Spec: proto.CloneOf(found.GetSpec()),
	}, nil
}

// storedRevision returns the children revision n of release wrote, as it
// wrote them: read from the log, not rendered again, so a rollback brings
// back revision n's random values and lookups as they were. The record of
// revision n is the last status of the release that finished it; each
// child is its last Applied event at or before that status.
func (r *Reconciler) storedRevision(ctx context.Context, release projections.Key, n int) ([]*schemas.Object, error) {
	evs, err := r.cfg.History(ctx, release)
	if err != nil {
		return nil, err
	}
	var at uint64
	var rec revisionRecord
	for _, ev := range evs {
		if ev.GetType() != schemas.EventType_EVENT_TYPE_STATUS_CHANGED {
			continue
		}
		d := recordOf(ev.GetObject().GetStatus().GetDetails())
		if d.Revision == n && d.Stage == "" && d.Failed == "" && len(d.Children) > 0 {
			at, rec = ev.GetSequence(), d
		}
	}
	if at == 0 {
		return nil, fmt.Errorf("revision %d: no finished revision recorded in the release's history", n)
	}
	out := make([]*schemas.Object, 0, len(rec.Children))
	for _, s := range rec.Children {
		k, err := parseKey(s)
		if err != nil {
			return nil, fmt.Errorf("revision %d: %w", n, err)
		}
		hist, err := r.cfg.History(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("revision %d: %s: %w", n, k, err)
		}
		var found *schemas.Object
		for _, ev := range hist {
			if ev.GetSequence() > at {
				break
			}
			if ev.GetType() == schemas.EventType_EVENT_TYPE_APPLIED && ev.GetObject() != nil {
				found = ev.GetObject()
			}
		}
		if found == nil {
			return nil, fmt.Errorf("revision %d: %s has no write in the log", n, k)
		}
		out = append(out, desiredOnly(found))
	}
	return out, nil
}

// desiredOnly is o as a writer gives it: what the gate and the log add
// (status, generation, resourceVersion, the gate's annotations) left out.
func desiredOnly(o *schemas.Object) *schemas.Object {
	md := o.GetMetadata()
	ann := map[string]string{}
	for k, v := range md.GetAnnotations() {
		if !strings.HasPrefix(k, gatePrefix) {
			ann[k] = v
		}
	}
	return &schemas.Object{
		ApiVersion: o.GetApiVersion(),
		Kind:       o.GetKind(),
		Metadata: &schemas.ObjectMeta{
			Name: md.GetName(), Namespace: md.GetNamespace(), Labels: md.GetLabels(), Annotations: ann,
			Group: md.GetGroup(), DependsOn: md.GetDependsOn(),
		},
		Spec: proto.CloneOf(o.GetSpec()),
	}
}

// parseKey reads a key as Key.String writes it.
func parseKey(s string) (projections.Key, error) {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 2:
		return projections.Key{Kind: parts[0], Name: parts[1]}, nil
	case 3:
		return projections.Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
	}
	return projections.Key{}, fmt.Errorf("%q is not a key", s)
}
