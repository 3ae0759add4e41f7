package manifest

import (
	"errors"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// kindSpec checks the spec of the kinds jetplane runs itself (Pod, Node)
// with the Kubernetes v1 types: a field jetplane would ignore is an error
// naming it, never silently dropped.
func (c *checker) kindSpec(o *schemas.Object, prefix string) {
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
