package manifest

import (
	"errors"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/builtin"
	"github.com/jetplane/jetplane/schemas/podspec"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// kindSpec checks the content of built-in Kubernetes kinds strictly against
// their k8s.io/api types (package builtin), then the rules of the kinds
// jetplane runs itself (Pod, Node): a field jetplane would ignore is an
// error naming it, never silently dropped. Kinds defined by a
// CustomResourceDefinition are checked by the gate, which knows the
// definitions in effect.
func (c *checker) kindSpec(o *schemas.Object, prefix string) {
	if o.GetKind() == subscription.Kind {
		c.subscriptionSpec(o, prefix)
		return
	}
	if o.GetSpec() == nil || o.GetKind() == "" || o.GetApiVersion() == "" {
		return
	}
	var err error
	if o.GetApiVersion() != "v1" || o.GetKind() != podspec.KindPod || !podspec.ReadDirectly(o.GetSpec()) {
		// (A v1 Pod's spec that podspec reads directly is one the strict
		// decoding of builtin.Check accepts: it is not decoded twice.)
		err = builtin.Check(o.GetApiVersion(), o.GetKind(), o.GetSpec())
	}
	var fes builtin.Errors
	switch {
	case err == nil:
	case errors.Is(err, builtin.ErrNotBuiltin):
		return
	case errors.As(err, &fes):
		for _, fe := range fes {
			c.add(joinPath(prefix, fe.Field), "%s", fe.Reason)
		}
		return
	default:
		c.add(fieldPath(prefix, "spec"), "%v", err)
		return
	}
	if o.GetApiVersion() != "v1" || c.kubernetes {
		return
	}
	err = podspec.Check(o.GetKind(), o.GetSpec())
	var fe *podspec.FieldError
	switch {
	case err == nil:
	case errors.As(err, &fe):
		c.add(joinPath(prefix, fe.Field), "%s", fe.Reason)
	default:
		c.add(fieldPath(prefix, "spec"), "%v", err)
	}
}

// joinPath puts a path found inside an object under its List item.
func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

// subscriptionSpec checks a Subscription's spec, so a bad sink or filter is
// refused when applied rather than recorded as a failed status.
func (c *checker) subscriptionSpec(o *schemas.Object, prefix string) {
	_, err := subscription.Decode(o.GetSpec())
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *subscription.FieldError
		if errors.As(e, &fe) {
			c.add(joinPath(prefix, fe.Field), "%s", fe.Reason)
			continue
		}
		c.add(fieldPath(prefix, "spec"), "%v", e)
	}
}
