package manifest

import "strings"

// Kubernetes kinds whose content lives beside spec rather than in it (a
// ConfigMap's data, a Role's rules). jetplane's object model has one spec,
// so these fields are accepted at the top level for these kinds, as people
// write them, and stored under spec with the same name. See
// docs/decisions/0005-kubernetes-manifests-as-written.md.
var contentFields = map[string][]string{
	"ConfigMap":                      {"data", "binaryData", "immutable"},
	"Secret":                         {"data", "stringData", "type", "immutable"},
	"ServiceAccount":                 {"secrets", "imagePullSecrets", "automountServiceAccountToken"},
	"Role":                           {"rules"},
	"ClusterRole":                    {"rules", "aggregationRule"},
	"RoleBinding":                    {"subjects", "roleRef"},
	"ClusterRoleBinding":             {"subjects", "roleRef"},
	"Endpoints":                      {"subsets"},
	"StorageClass":                   {"provisioner", "parameters", "reclaimPolicy", "volumeBindingMode", "allowVolumeExpansion", "mountOptions", "allowedTopologies"},
	"PriorityClass":                  {"value", "globalDefault", "description", "preemptionPolicy"},
	"RuntimeClass":                   {"handler", "overhead", "scheduling"},
	"MutatingWebhookConfiguration":   {"webhooks"},
	"ValidatingWebhookConfiguration": {"webhooks"},
}

// clusterScoped lists the Kubernetes kinds that have no namespace. A
// dependsOn entry naming one of them without a namespace means the
// cluster-scoped object; for every other kind it means the depending
// object's own namespace, as in Kubernetes.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "StorageClass": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true,
	"PriorityClass": true, "IngressClass": true, "RuntimeClass": true, "CSIDriver": true,
	"CSINode": true, "VolumeAttachment": true, "MutatingWebhookConfiguration": true,
	"ValidatingWebhookConfiguration": true, "APIService": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// isClusterScoped reports whether kind ("Kind" or "Kind.group") is a known
// cluster-scoped kind.
func isClusterScoped(kind string) bool {
	k, _, _ := strings.Cut(kind, ".")
	return clusterScoped[k]
}
