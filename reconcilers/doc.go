// Package reconcilers will hold the reconciler runtime: keyed,
// deduplicated, level-triggered work driven by the log, partitioned across
// instances (DESIGN.md, "Reconcilers"). Its subpackages are the runtime's
// parts; queue is the first: the keyed queue that decides what runs when.
// Reconcilers never speak JetStream directly.
package reconcilers
