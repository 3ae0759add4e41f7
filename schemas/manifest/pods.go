package manifest

import (
	"errors"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// kindSpec checks the spec of the kinds jetplane runs itself (Pod, Node)
// with the Kubernetes v1 types: a field jetplane would ignore is an error
// naming it, never silently dropped.
func (c *checker) kindSpec(o *schemas.Object, prefix string) {
	if o.GetKind() == subscription.Kind {
		c.subscriptionSpec(o, prefix)
		return
	}
	if o.GetApiVersion() != "v1" || o.GetSpec() == nil {
		return
	}
	err := podspec.Check(o.GetKind(), o.GetSpec())
	var fe *podspec.FieldError
	switch {
	case err == nil:
	case errors.As(err, &fe):
		field := fe.Field
		if prefix != "" {
			field = prefix + "." + field
		}
		c.add(field, "%s", fe.Reason)
	default:
		c.add(fieldPath(prefix, "spec"), "%v", err)
	}
}

// subscriptionSpec checks a Subscription's spec, so a bad sink or filter is
// refused when applied rather than recorded as a failed status.
func (c *checker) subscriptionSpec(o *schemas.Object, prefix string) {
	_, err := subscription.Decode(o.GetSpec())
	if err == nil {
		return
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *subscription.FieldError
		if errors.As(e, &fe) {
			field := fe.Field
			if prefix != "" {
				field = prefix + "." + field
			}
			c.add(field, "%s", fe.Reason)
			continue
		}
		c.add(fieldPath(prefix, "spec"), "%v", e)
	}
}
