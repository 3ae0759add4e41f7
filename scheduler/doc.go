// Package scheduler places unbound pods on nodes the way kube-scheduler's
// scheduling framework does: a profile of plugins at the extension points
// PreFilter, Filter, PostFilter, PreScore, Score, NormalizeScore, Reserve,
// Permit and Bind.
//
// The scheduling cycle (Cycle) is a pure function of the pod, a node
// Snapshot (which already counts assumed pods) and a Profile: it reads no
// clock, no log and no projection, so a decision recorded in a Bound event
// can be re-run later and must reach the same node. Around it, Scheduler
// does the I/O: it follows the projection to keep a Cache of nodes (one
// decoded NodeInfo per node revision) and bound pods, assumes each placement
// so that a burst never overcommits a node, and appends Bound events in
// batches. Built-in plugins live here too; WebAssembly plugins are in
// scheduler/wasm, and must not be imported by this package.
package scheduler
