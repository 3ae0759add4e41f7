// Package workload runs the workload kinds of apps/v1 and batch/v1 on
// jetplane's reconciler runtime, as Kubernetes' own controllers do:
// a Deployment keeps ReplicaSets named by the hash of its pod template and
// rolls between them within maxSurge and maxUnavailable (or Recreate); a
// ReplicaSet keeps its number of pods; a Job runs pods to its completions
// within its parallelism, backoff limit and deadline; a DaemonSet keeps one
// pod on every eligible node; a CronJob starts Jobs on its schedule.
// Deleting an owner deletes its dependents (garbage collection by owner)
// in the background, in the foreground, or orphans them (gc.go).
//
// Children are written through the gate (the Writer) as a controller
// acting for their owner; the gate stamps the owner annotation, which is
// jetplane's ownerReference, and refuses to let an owner touch an object
// it did not create unless that object's writer allowed the adoption.
// The package decides; it does no I/O of its own beyond the State it reads
// and the Writer it writes through. It must not import bridge.
package workload
