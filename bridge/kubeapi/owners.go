package kubeapi

import (
	"strings"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// withOwnerReferences adds metadata.ownerReferences to m, the Kubernetes
// shape of o: the gate's owner annotation (decision 0038) names the object
// whose controller wrote o, and that object, while it exists, is o's
// controller owner, blocking its deletion in the foreground as Kubernetes'
// controllers set it (decision 0071). Clients that send ownerReferences
// have them dropped (droppedMetadata): only the gate decides ownership.
func (s *Server) withOwnerReferences(m map[string]any, o *schemas.Object) map[string]any {
	ref := o.GetMetadata().GetAnnotations()[gate.AnnotationOwner]
	if ref == "" {
		return m
	}
	kind, rest, ok := strings.Cut(ref, "/")
	ns, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return m
	}
	owner := s.cfg.Store.Get(projections.Key{Kind: kind, Namespace: ns, Name: name})
	if owner == nil {
		return m
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		return m
	}
	md["ownerReferences"] = []any{map[string]any{
		"apiVersion": owner.GetApiVersion(), "kind": owner.GetKind(), "name": name, "uid": owner.GetMetadata().GetUid(),
		"controller": true, "blockOwnerDeletion": true,
	}}
	return m
}
