package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/kinds"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// Annotations the gate keeps on objects (decision 0038). Those under
// GatePrefix are the gate's alone: whatever a writer puts there is
// replaced by what the gate computes, so nobody can claim a scope or an
// owner they do not have.
const (
	// GatePrefix starts every annotation only the gate sets.
	GatePrefix = "gate.jetplane.dev/"
	// AnnotationScope holds the namespaces (comma-separated) of the
	// confined principal that last set the object's spec: a controller
	// acting for the object writes its children there and nowhere else.
	// Absent: the last writer was unconfined.
	AnnotationScope = GatePrefix + "scope"
	// AnnotationOwner names the object whose controller wrote this one
	// ("HelmRelease/shop/web"), the gate's ownerReference: only that
	// owner's controller may change or delete it.
	AnnotationOwner = GatePrefix + "owner"
	// AnnotationAllowAdoption, set by the object's own writer, names the
	// one owner ("HelmRelease/shop/web") that may adopt the object though
	// it did not create it.
	AnnotationAllowAdoption = "jetplane.dev/allow-adoption-by"
)

// OwnerRef is how AnnotationOwner names an owner.
func OwnerRef(k projections.Key) string {
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// ScopeOf is the namespaces a controller acting for o is confined to: the
// scope of the principal that last set o's spec (nil: unconfined).
func ScopeOf(o *schemas.Object) []string {
	s := o.GetMetadata().GetAnnotations()[AnnotationScope]
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Controller is the principal of a reconciler named actor writing the
// children of owner, in owner's scope.
func Controller(actor string, owner *schemas.Object) Principal {
	return Principal{Name: actor, Role: RoleController, Namespaces: ScopeOf(owner), Owner: OwnerRef(projections.ObjectKey(owner))}
}

// target describes k, stored now as cur (nil when absent), for Authorize.
func target(k projections.Key, cur *schemas.Object) Target {
	t := Target{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, ClusterScoped: !kinds.Lookup(k.Kind).Namespaced}
	if cur != nil {
		ann := cur.GetMetadata().GetAnnotations()
		t.Exists, t.Owner, t.AllowAdoption = true, ann[AnnotationOwner], ann[AnnotationAllowAdoption]
		t.Deleting = cur.GetStatus().GetGoal() == projections.GoalDeleted
	}
	return t
}

func authorizeApply(p Principal, k projections.Key, cur, next *schemas.Object) error {
	if cur.GetStatus().GetGoal() == projections.GoalDeleted {
		// Left to the being-deleted check, which names what to do.
		cur = nil
	}
	t := target(k, cur)
	t.Reads = reads(next)
	return Authorize(p, VerbApply, t)
}

// reads is what o will read for the principal that writes it: a
// Subscription delivers the changes of its filter's namespaces (AllNamespaces
// when it names none). Objects of other kinds read nothing for their writer.
func reads(o *schemas.Object) []string {
	if o.GetKind() != subscription.Kind {
		return nil
	}
	s, err := subscription.Decode(o.GetSpec())
	if err != nil {
		return nil // refused by the kind's own check
	}
	if len(s.Filter.Namespaces) == 0 {
		return []string{AllNamespaces}
	}
	return s.Filter.Namespaces
}

// stamp returns o with the gate's annotations as p writing over cur makes
// them: the scope of p, the owner p writes for (or cur's, when p is not a
// controller). o is not modified.
func stamp(p Principal, cur, o *schemas.Object) *schemas.Object {
	want := map[string]string{}
	if p.Confined() && p.Role != RoleNode && p.Role != RoleBridge {
		want[AnnotationScope] = strings.Join(p.Namespaces, ",")
	}
	if p.Role == RoleController {
		want[AnnotationOwner] = p.Owner
	} else if owner := cur.GetMetadata().GetAnnotations()[AnnotationOwner]; owner != "" {
		want[AnnotationOwner] = owner
	}
	ann := o.GetMetadata().GetAnnotations()
	same := true
	for k, v := range ann {
		if strings.HasPrefix(k, GatePrefix) && want[k] != v {
			same = false
		}
	}
	for k, v := range want {
		if ann[k] != v {
			same = false
		}
	}
	if same {
		return o
	}
	o = proto.CloneOf(o)
	if o.Metadata == nil {
		o.Metadata = &schemas.ObjectMeta{}
	}
	next := make(map[string]string, len(ann)+len(want))
	for k, v := range ann {
		if !strings.HasPrefix(k, GatePrefix) {
			next[k] = v
		}
	}
	for k, v := range want {
		next[k] = v
	}
	o.Metadata.Annotations = next
	return o
}

// seal returns objs with every secret value sealed (decision 0037): the
// Secrets of every writer, and those inside an Apply's manifest. Objects
// that carry secrets are copied; the callers' objects are not modified.
func (g *Gate) seal(ctx context.Context, keys []projections.Key, objs []*schemas.Object) ([]*schemas.Object, error) {
	copied := false
	for i, o := range objs {
		if !seal.Holds(o) {
			continue
		}
		if !copied {
			objs, copied = append([]*schemas.Object(nil), objs...), true
		}
		o = proto.CloneOf(o)
		if err := g.cfg.Sealer.Seal(ctx, o, g.cfg.State.Get(keys[i])); err != nil {
			if errors.Is(err, seal.ErrNoKey) {
				return nil, invalid("%s: %v", keys[i], err)
			}
			return nil, fmt.Errorf("seal %s: %w", keys[i], err)
		}
		objs[i] = o
	}
	return objs, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Observe checks that p may record the observed event ev and seals the
// secret values of its object in place (the bridge's door: observations
// are appended by the bridge's own pipeline, but only once admitted here).
func (g *Gate) Observe(ctx context.Context, p Principal, ev *schemas.Event) error {
	k := projections.KeyOf(ev.GetKey())
	if err := Authorize(p, VerbObserve, Target{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}); err != nil {
		return err
	}
	if o := ev.GetObject(); seal.Holds(o) {
		// kubectl apply keeps the whole manifest, values and all, in an
		// annotation: it never reaches the log.
		if md := o.GetSpec().GetFields()["metadata"].GetStructValue(); md != nil {
			delete(md.GetFields()["annotations"].GetStructValue().GetFields(), lastApplied)
		}
		if err := g.cfg.Sealer.Seal(ctx, o, g.cfg.State.Get(k)); err != nil {
			return fmt.Errorf("seal observed %s: %w", k, err)
		}
	}
	return nil
}

// manifestTarget is the Kubernetes object an Apply's manifest names, in
// the cluster's namespace (a namespaced manifest without one lands in
// "default").
func manifestTarget(o *schemas.Object) (Target, bool) {
	if o.GetKind() != seal.ApplyKind {
		return Target{}, false
	}
	m := o.GetSpec().GetFields()["manifest"].GetStructValue().GetFields()
	if m == nil {
		return Target{}, false
	}
	kind := m["kind"].GetStringValue()
	if g, _, ok := strings.Cut(m["apiVersion"].GetStringValue(), "/"); ok && !strings.Contains(kind, ".") {
		kind += "." + g
	}
	md := m["metadata"].GetStructValue().GetFields()
	t := Target{Kind: kind, Namespace: md["namespace"].GetStringValue(), Name: md["name"].GetStringValue(), ClusterScoped: !kinds.Lookup(kind).Namespaced}
	if t.Namespace == "" && !t.ClusterScoped {
		t.Namespace = "default"
	}
	if t.ClusterScoped {
		t.Namespace = ""
	}
	return t, true
}
