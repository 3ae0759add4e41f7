package helmrelease

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// Revision returns the HelmRelease as it was applied at revision n (its
// generation n), read from the release's history: what `jetplane rollback
// --to-revision n` applies again. Only what a person writes is kept
// (apiVersion, kind, name, namespace, labels, annotations, group,
// dependsOn, spec), so applying it makes a new revision with revision n's
// chart and values. The chart itself is found again by name and version:
// pushed versions never change (events.ErrExists).
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
	return &schemas.Object{
		ApiVersion: found.GetApiVersion(),
		Kind:       found.GetKind(),
		Metadata: &schemas.ObjectMeta{
			Name: md.GetName(), Namespace: md.GetNamespace(), Labels: md.GetLabels(), Annotations: md.GetAnnotations(),
			Group: md.GetGroup(), DependsOn: md.GetDependsOn(),
		},
		Spec: proto.CloneOf(found.GetSpec()),
	}, nil
}
