// Package reconcilers is the reconciler runtime: keyed, deduplicated,
// level-triggered work driven by the log, partitioned across instances
// (docs/ARCHITECTURE.md, "The runtime's rules"; decisions 0007, 0008, 0013, 0014). The
// runtime turns log deliveries into keyed work, runs each key on the
// latest projected state, writes statuses in group commits, and moves
// partitions between instances through Members. Its parts: queue, the
// keyed queue that decides what runs when (a pure state machine);
// memberfake, an in-memory Members for tests; and the built-in kinds in
// their own subpackages (apply). Reconcilers never speak JetStream
// directly.
package reconcilers
