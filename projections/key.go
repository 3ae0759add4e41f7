package projections

import (
	"strings"

	"github.com/jetplane/jetplane/schemas"
)

// Key identifies an object: kind (with group), namespace, name. It is
// comparable, so it serves as a map key.
type Key struct {
	Kind, Namespace, Name string
}

// ObjectKey is the key of object o: its kind qualified by the API group of
// its apiVersion ("apps/v1" + Deployment is "Deployment.apps", "v1" +
// Service is "Service"), its namespace and its name. The group is part of
// the key because two groups may define the same kind.
func ObjectKey(o *schemas.Object) Key {
	kind := o.GetKind()
	if v := o.GetApiVersion(); strings.LastIndexByte(v, '/') > 0 {
		kind += "." + v[:strings.LastIndexByte(v, '/')]
	}
	return Key{Kind: kind, Namespace: o.GetMetadata().GetNamespace(), Name: o.GetMetadata().GetName()}
}

// KeyOf converts a protobuf key.
func KeyOf(k *schemas.ObjectKey) Key {
	return Key{Kind: k.GetKind(), Namespace: k.GetNamespace(), Name: k.GetName()}
}

// Proto converts the key to its protobuf form.
func (k Key) Proto() *schemas.ObjectKey {
	return &schemas.ObjectKey{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// String is "Kind/namespace/name", or "Kind/name" for cluster-scoped keys.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

func (k Key) less(o Key) bool {
	if k.Kind != o.Kind {
		return k.Kind < o.Kind
	}
	if k.Namespace != o.Namespace {
		return k.Namespace < o.Namespace
	}
	return k.Name < o.Name
}
