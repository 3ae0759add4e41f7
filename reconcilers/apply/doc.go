// Package apply is the reconciler of the Apply kind: one Kubernetes
// manifest pushed into one cluster by server-side apply (decision
// 0009, docs/decisions/0009-kubernetes-objects-in-the-log.md).
//
// An Apply's spec is
//
//	cluster: prod            # a cluster named in Config.Clusters
//	manifest:                # one Kubernetes object, as written for kubectl
//	  apiVersion: apps/v1
//	  kind: Deployment
//	  metadata: {name: web, namespace: shop}
//	  spec: {...}
//
// Reconcile labels the object with its owner (LabelApplyNamespace,
// LabelApplyName), reads it from the cluster and applies it with field
// manager "jetplane" when it is missing or differs from the manifest, so a
// resync of an object in sync costs one GET. The reconciler is a
// reconcilers.Watcher: the bridge's Observed events of an owned object run
// its Apply again, which is how drift is corrected. Finalize deletes the
// object and waits until the projection no longer holds its observed key.
// RATIONALE.md says why (which errors are terminal, how drift is judged).
//
// The package owns the apply and delete calls of Apply objects and the
// per-cluster discovery cache they need. It never writes to the log (the
// runtime records status) and never watches a cluster (bridge/kube does).
package apply
