package manifest

// IsClusterScoped reports whether kind ("Kind" or "Kind.group") is a
// Kubernetes kind known to have no namespace (Namespace, ClusterRole,
// CustomResourceDefinition, ...). Renderers use it to decide which objects
// take a default namespace.
func IsClusterScoped(kind string) bool { return isClusterScoped(kind) }
