package kube

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// AnnotationCluster names the cluster an observed object was seen in. The
// uid and resourceVersion annotations are projections.AnnotationUID and
// projections.AnnotationResourceVersion, which the fold compares.
const AnnotationCluster = "jetplane.io/cluster"

// Actor is who writes a cluster's events: "bridge/<cluster>".
func Actor(cluster string) string { return "bridge/" + cluster }

// Key is the key under which an object of kind (with group), namespace and
// name in cluster is observed (decision 0009): namespace "<cluster>/<ns>",
// "<cluster>/" for cluster-scoped objects.
func Key(cluster, kind, namespace, name string) projections.Key {
	return projections.Key{Kind: kind, Namespace: cluster + "/" + namespace, Name: name}
}

// KeyOf is the key of u observed in cluster.
func KeyOf(cluster string, u *unstructured.Unstructured) projections.Key {
	gvk := u.GroupVersionKind()
	return Key(cluster, kindName(gvk.Kind, gvk.Group), u.GetNamespace(), u.GetName())
}

func kindName(kind, group string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// Change is what an event records: the suffix of its dedupe id.
type Change string

const (
	Observed Change = "Observed"
	Deleted  Change = "Deleted"
)

// EventID is the dedupe id of one change of one object (decision 0009):
// k8s/<cluster>/<uid>/<resourceVersion>/<Observed|Deleted>. Every bridge
// watching the cluster derives the same id from the same change, so the
// log stores it once.
func EventID(cluster, uid, resourceVersion string, c Change) string {
	return "k8s/" + cluster + "/" + uid + "/" + resourceVersion + "/" + string(c)
}

// observedEvent is the Observed event of u, seen in cluster at now: the
// object without managedFields as spec, its labels, and the cluster, uid
// and resourceVersion as annotations. It does not modify u.
func observedEvent(cluster string, u *unstructured.Unstructured, now time.Time) (*schemas.Event, error) {
	spec, err := structpb.NewStruct(withoutManagedFields(u.Object))
	if err != nil {
		return nil, fmt.Errorf("%s: convert: %w", KeyOf(cluster, u), err)
	}
	obj := objectOf(cluster, u)
	obj.Spec = spec
	if t := u.GetCreationTimestamp(); !t.IsZero() {
		obj.Metadata.CreationTime = timestamppb.New(t.Time)
	}
	return &schemas.Event{
		Id:     EventID(cluster, string(u.GetUID()), u.GetResourceVersion(), Observed),
		Type:   schemas.EventType_EVENT_TYPE_OBSERVED,
		Key:    KeyOf(cluster, u).Proto(),
		Object: obj,
		Actor:  Actor(cluster),
		Time:   timestamppb.New(now),
	}, nil
}

// deletedEvent is the Finalized event of u, deleted from cluster (u is its
// last state: the object of a watch's delete, or the last one known before
// a relist found it gone). The object carries the metadata, not the spec:
// the last Observed event holds that.
func deletedEvent(cluster string, u *unstructured.Unstructured, now time.Time) *schemas.Event {
	return &schemas.Event{
		Id:     EventID(cluster, string(u.GetUID()), u.GetResourceVersion(), Deleted),
		Type:   schemas.EventType_EVENT_TYPE_FINALIZED,
		Key:    KeyOf(cluster, u).Proto(),
		Object: objectOf(cluster, u),
		Actor:  Actor(cluster),
		Time:   timestamppb.New(now),
	}
}

// goneEvent is the Finalized event of key k, which current state holds as
// rec but the cluster no longer has: it was deleted while no bridge
// watched. Its id comes from rec's uid and resourceVersion, so bridges that
// find the same object gone agree on it.
func goneEvent(cluster string, k projections.Key, rec *schemas.ObjectRecord, now time.Time) *schemas.Event {
	ann := rec.GetMetadata().GetAnnotations()
	uid, rv := ann[projections.AnnotationUID], ann[projections.AnnotationResourceVersion]
	if uid == "" {
		// Not written by a bridge; name it by its place in the log.
		uid, rv = k.String(), strconv.FormatUint(rec.GetMetadata().GetResourceVersion(), 10)
	}
	meta := &schemas.ObjectMeta{Name: k.Name, Namespace: k.Namespace, Uid: uid, Labels: rec.GetMetadata().GetLabels(), Annotations: map[string]string{
		AnnotationCluster:                     cluster,
		projections.AnnotationUID:             uid,
		projections.AnnotationResourceVersion: rv,
	}}
	return &schemas.Event{
		Id:     EventID(cluster, uid, rv, Deleted),
		Type:   schemas.EventType_EVENT_TYPE_FINALIZED,
		Key:    k.Proto(),
		Object: &schemas.Object{ApiVersion: rec.GetApiVersion(), Kind: rec.GetKind(), Metadata: meta},
		Actor:  Actor(cluster),
		Time:   timestamppb.New(now),
	}
}

func objectOf(cluster string, u *unstructured.Unstructured) *schemas.Object {
	k := KeyOf(cluster, u)
	return &schemas.Object{
		ApiVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Metadata: &schemas.ObjectMeta{
			Name:      k.Name,
			Namespace: k.Namespace,
			Uid:       string(u.GetUID()),
			Labels:    u.GetLabels(),
			Annotations: map[string]string{
				AnnotationCluster:                     cluster,
				projections.AnnotationUID:             string(u.GetUID()),
				projections.AnnotationResourceVersion: u.GetResourceVersion(),
			},
		},
	}
}

// withoutManagedFields returns obj, or a copy of it whose metadata lacks
// managedFields: field ownership is bookkeeping of the apiserver, large,
// and changes on every write. obj is not modified.
func withoutManagedFields(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	if _, has := md["managedFields"]; !has {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	md2 := make(map[string]any, len(md))
	for k, v := range md {
		if k != "managedFields" {
			md2[k] = v
		}
	}
	out["metadata"] = md2
	return out
}

// resourceVersionOf parses an observed record's Kubernetes resourceVersion;
// ok is false when it has none or it is not a number.
func resourceVersionOf(rec *schemas.ObjectRecord) (uid string, rv uint64, ok bool) {
	ann := rec.GetMetadata().GetAnnotations()
	rv, err := strconv.ParseUint(ann[projections.AnnotationResourceVersion], 10, 64)
	return ann[projections.AnnotationUID], rv, err == nil
}

// alreadyHeld reports whether current state holds u at its resourceVersion
// or a newer one: appending u again would change nothing (the fold drops
// it as stale), so the bridge skips it. A relist after a restart so
// rewrites only what changed while the bridge was away.
func alreadyHeld(rec *schemas.ObjectRecord, u *unstructured.Unstructured) bool {
	uid, held, ok := resourceVersionOf(rec)
	if !ok || uid != string(u.GetUID()) {
		return false
	}
	rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	return err == nil && rv <= held
}
