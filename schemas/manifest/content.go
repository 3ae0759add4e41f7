package manifest

import (
	"slices"
	"strings"
)

// ContentFields are the top-level fields that kind ("Kind" or
// "Kind.group") has beside spec in Kubernetes (a ConfigMap's data) and that
// jetplane keeps under spec with the same name. Edges that speak
// Kubernetes' shape move them back to the top level on the way out.
func ContentFields(kind string) []string {
	k, _, _ := strings.Cut(kind, ".")
	return slices.Clone(contentFields[k])
}
