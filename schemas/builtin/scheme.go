// Package builtin knows the Kubernetes kinds jetplane accepts without a
// CustomResourceDefinition — every kind of the GA API groups of k8s.io/api
// and apiextensions.k8s.io's CustomResourceDefinition — and decodes their
// content strictly into those Go types: an unknown or misspelled field is an
// error at its full path ("spec.template.spec.containers[0].comand"), with
// the fields that were probably meant, and a value of the wrong type is an
// error naming the field and the type.
//
// It is pure: the type table is built once at start-up from k8s.io/api's
// registration functions, and Check does no I/O.
package builtin

import (
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// scheme holds the GA versions only: a kind at a version Kubernetes no
// longer serves (apps/v1beta1 Deployment) is refused with the version to
// use, as kube-apiserver refuses it.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		admissionregistrationv1.AddToScheme, appsv1.AddToScheme, autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme, batchv1.AddToScheme, certificatesv1.AddToScheme,
		coordinationv1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme,
		eventsv1.AddToScheme, flowcontrolv1.AddToScheme, networkingv1.AddToScheme,
		nodev1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme, resourcev1.AddToScheme,
		schedulingv1.AddToScheme, storagev1.AddToScheme, apiextensionsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic("builtin: register k8s.io/api types: " + err.Error())
		}
	}
	return s
}()

// kinds maps "Kind.group" (or "Kind" for the core group) to the versions
// that serve it, preferred first.
var kinds = func() map[string][]string {
	out := map[string][]string{}
	for gvk := range scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if isMetaKind(gvk.Kind) {
			continue
		}
		k := key(gvk.Group, gvk.Kind)
		out[k] = append(out[k], gvk.Version)
	}
	for k := range out {
		// "v2" before "v1": the newest GA version first.
		sort.Sort(sort.Reverse(sort.StringSlice(out[k])))
	}
	return out
}()

// isMetaKind reports the kinds every group registers for its API
// machinery (WatchEvent, Status, ...), which nobody applies.
func isMetaKind(kind string) bool {
	switch kind {
	case "WatchEvent", "Status", "APIVersions", "APIGroup", "APIGroupList", "APIResourceList",
		"DeleteOptions", "ListOptions", "GetOptions", "CreateOptions", "UpdateOptions", "PatchOptions",
		"ExportOptions", "Table", "PartialObjectMetadata", "PartialObjectMetadataList",
		"SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview", "SelfSubjectRulesReview",
		"TokenReview", "Eviction", "Binding", "Scale", "TokenRequest", "RangeAllocation",
		"ComponentStatus", "SerializedReference", "EphemeralContainers", "ConversionReview":
		return true
	}
	return false
}

func key(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// Kinds lists every built-in Kubernetes kind as keys hold it
// ("Deployment.apps", "ConfigMap"), sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Known reports whether kind (as keys hold it) is a built-in Kubernetes
// kind, at any version.
func Known(kind string) bool {
	_, ok := kinds[kind]
	return ok
}

// Versions are the API versions that serve kind (as keys hold it), newest
// first; nil for a kind that is not built in.
func Versions(kind string) []string { return kinds[kind] }

// gvk splits apiVersion and kind.
func gvk(apiVersion, kind string) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}
