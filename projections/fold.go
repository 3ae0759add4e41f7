package projections

import (
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// Goals an object's status can hold.
const (
	GoalExists  = "exists"
	GoalDeleted = "deleted"
)

// Annotations bridge/kube sets on every object it observes in a Kubernetes
// cluster (decision 0009). The fold compares them to drop stale
// observations.
const (
	// AnnotationUID is the Kubernetes object's uid.
	AnnotationUID = "jetplane.io/uid"
	// AnnotationResourceVersion is the Kubernetes resourceVersion the
	// observation was of: an etcd revision, a decimal number.
	AnnotationResourceVersion = "jetplane.io/resource-version"
)

// Fold returns the state of one key after ev, given its state before (nil
// when the key is absent). It works on records, whose spec stays encoded:
// no decision of the fold looks inside a spec. A nil result means the key is absent afterwards.
//
// Fold is pure and deterministic: it reads nothing but its arguments, so the
// log replayed from sequence 1 always reaches the state the live fold
// reached. It never mutates cur (objects in a Store are shared with readers
// and must stay immutable); it may take ownership of ev.Object.
//
// Every event of a present key sets resourceVersion to the event's sequence.
// Events the fold cannot use (no object where one is needed, a status for an
// absent key) leave the state unchanged, so a malformed event from an
// outside publisher cannot corrupt it.
//
// Observations of Kubernetes objects (decision 0009) are ignored when
// stale: an Observed event of the same uid as the current record whose
// resourceVersion is not newer, and a Finalized event that names another
// uid than the current record (the deletion of an object that has since been
// recreated under the same name). A replay or a relist outside the log's
// duplicate window, or a retried append that lands after a newer one, so
// cannot move an object back.
func Fold(cur *schemas.ObjectRecord, ev *schemas.EventRecord) *schemas.ObjectRecord {
	switch ev.GetType() {
	case schemas.EventType_EVENT_TYPE_APPLIED, schemas.EventType_EVENT_TYPE_OBSERVED:
		next := ev.GetObject()
		if next == nil {
			return cur
		}
		if ev.GetType() == schemas.EventType_EVENT_TYPE_OBSERVED {
			if staleObservation(cur, next) {
				return cur
			}
			if otherUID(cur, next) {
				// Another Kubernetes object under the same name: nothing
				// of the old one carries over.
				cur = nil
			}
		}
		if next.Metadata == nil {
			next.Metadata = &schemas.ObjectMeta{}
		}
		next.Metadata.Name = ev.Key.GetName()
		next.Metadata.Namespace = ev.Key.GetNamespace()
		next.Metadata.ResourceVersion = ev.Sequence
		// Status belongs to jetplane, not to the writer of desired state:
		// keep what reconcilers recorded, with the goal set to exists.
		status := cur.GetStatus()
		switch {
		case status == nil:
			status = &schemas.Status{Goal: GoalExists}
		case status.Goal != GoalExists:
			status = proto.CloneOf(status)
			status.Goal = GoalExists
		}
		next.Status = status
		if cur != nil {
			next.Metadata.CreationTime = cur.Metadata.GetCreationTime()
			next.Metadata.Uid = cur.Metadata.GetUid()
		}
		return next
	case schemas.EventType_EVENT_TYPE_DELETE_REQUESTED:
		if cur == nil {
			return nil
		}
		next := revise(cur, ev.Sequence)
		if next.Metadata.DeletionTime == nil {
			next.Metadata.DeletionTime = ev.GetTime()
		}
		status := proto.CloneOf(cur.GetStatus())
		if status == nil {
			status = &schemas.Status{}
		}
		status.Goal = GoalDeleted
		next.Status = status
		// A deletion's propagation policy arrives as a finalizer
		// (foregroundDeletion, orphan) for the owner's controller.
		for _, f := range ev.GetObject().GetMetadata().GetFinalizers() {
			if !slices.Contains(next.Metadata.Finalizers, f) {
				next.Metadata.Finalizers = append(slices.Clip(next.Metadata.Finalizers), f)
			}
		}
		return next
	case schemas.EventType_EVENT_TYPE_STATUS_CHANGED:
		if cur == nil || ev.GetObject().GetStatus() == nil {
			return cur
		}
		next := revise(cur, ev.Sequence)
		status := ev.Object.Status
		// Status writers report work; they cannot change the goal.
		status.Goal = cur.GetStatus().GetGoal()
		next.Status = status
		return next
	case schemas.EventType_EVENT_TYPE_BOUND:
		// A binding places a pod: the event carries the pod's spec with
		// nodeName set, written by the scheduler with optimistic
		// concurrency on the pod. It replaces the spec and nothing else
		// (metadata, generation and status stay: binding is not a change
		// of desired state by a user).
		if cur == nil {
			return nil
		}
		next := revise(cur, ev.Sequence)
		if spec := ev.GetObject().GetSpec(); spec != nil {
			next.Spec = spec
		}
		return next
	case schemas.EventType_EVENT_TYPE_FINALIZED:
		if otherUID(cur, ev.GetObject()) {
			return cur
		}
		return nil
	default:
		if cur == nil {
			return nil
		}
		return revise(cur, ev.Sequence)
	}
}

// staleObservation reports whether next observes the same Kubernetes object
// as cur (same uid) at a resourceVersion that is not newer. Versions that do
// not parse as numbers are never stale: only the check is lost.
func staleObservation(cur, next *schemas.ObjectRecord) bool {
	ca, na := cur.GetMetadata().GetAnnotations(), next.GetMetadata().GetAnnotations()
	uid := na[AnnotationUID]
	if uid == "" || ca[AnnotationUID] != uid {
		return false
	}
	curRV, err1 := strconv.ParseUint(ca[AnnotationResourceVersion], 10, 64)
	nextRV, err2 := strconv.ParseUint(na[AnnotationResourceVersion], 10, 64)
	return err1 == nil && err2 == nil && nextRV <= curRV
}

// otherUID reports whether both records name a Kubernetes uid and the uids
// differ.
func otherUID(cur, next *schemas.ObjectRecord) bool {
	a, b := cur.GetMetadata().GetAnnotations()[AnnotationUID], next.GetMetadata().GetAnnotations()[AnnotationUID]
	return a != "" && b != "" && a != b
}

// revise returns a copy of cur at a new resourceVersion, sharing spec and
// status (which the caller replaces, never mutates).
func revise(cur *schemas.ObjectRecord, seq uint64) *schemas.ObjectRecord {
	meta := proto.CloneOf(cur.Metadata)
	if meta == nil {
		meta = &schemas.ObjectMeta{}
	}
	meta.ResourceVersion = seq
	return &schemas.ObjectRecord{
		ApiVersion: cur.ApiVersion,
		Kind:       cur.Kind,
		Metadata:   meta,
		Spec:       cur.Spec,
		Status:     cur.Status,
	}
}

// ObjectOf decodes a record's spec into a full object. The record's
// metadata and status are shared, not copied. A spec that does not decode
// (only an outside publisher could write one) becomes empty.
func ObjectOf(r *schemas.ObjectRecord) *schemas.Object {
	if r == nil {
		return nil
	}
	spec := new(structpb.Struct)
	if err := proto.Unmarshal(r.Spec, spec); err != nil {
		spec = new(structpb.Struct)
	}
	return &schemas.Object{ApiVersion: r.ApiVersion, Kind: r.Kind, Metadata: r.Metadata, Spec: spec, Status: r.Status}
}
