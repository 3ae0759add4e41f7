package scheduler

import (
	"context"
	"sync"
	"time"
)

// Plugin is anything a profile enables. Each extension point is one more
// interface the plugin implements.
type Plugin interface {
	Name() string
}

// Versioned plugins say which build they are, so that a replayed decision
// can tell a changed plugin from a changed cluster.
type Versioned interface {
	Version() string
}

// PreFilterPlugin runs once per cycle before any Filter. Skip means its
// Filter is not called for this pod.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo) *Status
}

// PreFilterResultPlugin is a PreFilterPlugin that may also narrow the
// nodes the cycle evaluates, as kube-scheduler's PreFilterResult: a nil
// names means every node, a non-nil one only those nodes (the results of
// several plugins intersect). PreFilterResult is called instead of
// PreFilter.
type PreFilterResultPlugin interface {
	PreFilterPlugin
	PreFilterResult(ctx context.Context, state *CycleState, pod *PodInfo) (names []string, st *Status)
}

// FilterPlugin says whether a node can run the pod. It is called for many
// nodes in parallel and must be safe for concurrent use.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
}

// BatchFilterPlugin is a FilterPlugin that can also judge many nodes in
// one call (a WebAssembly guest pays a fixed cost per call). The cycle
// prefers FilterNodes when several nodes of a chunk are still feasible;
// out[i] is nodes[i]'s status, as Filter would return it.
type BatchFilterPlugin interface {
	FilterPlugin
	FilterNodes(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, out []*Status)
}

// PostFilterPlugin runs when no node passed Filter (for preemption); a
// Success with a node name nominates that node.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, rejected map[string]*Status) (nominated string, st *Status)
}

// PreScorePlugin runs once per cycle with the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status
}

// ScorePlugin ranks a feasible node. Called in parallel; must be safe for
// concurrent use.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status)
}

// BatchScorePlugin is a ScorePlugin that can also score many nodes in one
// call: scores[i] is nodes[i]'s score; a non-nil status fails them all.
type BatchScorePlugin interface {
	ScorePlugin
	ScoreNodes(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, scores []int64) *Status
}

// NormalizeScorePlugin is a ScorePlugin that rescales its scores to
// [0, MaxNodeScore] once all nodes are scored.
type NormalizeScorePlugin interface {
	ScorePlugin
	NormalizeScore(ctx context.Context, state *CycleState, pod *PodInfo, scores []NodeScore) *Status
}

// ReservePlugin is told when a node is chosen (Reserve) and when the
// placement is given up (Unreserve).
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *PodInfo, node string)
}

// PermitPlugin may reject a placement before it is bound, or make the pod
// wait (Wait, with a timeout) until it is allowed or rejected through the
// Handle's waiting pods.
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *PodInfo, node string) (*Status, time.Duration)
}

// PreBindPlugin runs before the Bind plugins; a failure gives the
// placement up (the Reserve plugins are told).
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
}

// PostBindPlugin is told once a pod's binding has landed.
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *PodInfo, node string)
}

// EnqueueExtensions says which cluster events may make a pod this plugin
// rejected schedulable (kube-scheduler's EventsToRegister). A plugin
// without it is interested in every event.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister(ctx context.Context) []ClusterEvent
}

// ClusterEvent is a kind of object and the changes to it, as
// kube-scheduler names them ("Node", "Pod", "*").
type ClusterEvent struct {
	Resource   string
	ActionType ActionType
}

// ActionType is a bit set of changes, numbered as in kube-scheduler.
type ActionType uint32

// Action types.
const (
	Add ActionType = 1 << iota
	Delete
	UpdateNodeAllocatable
	UpdateNodeLabel
	UpdateNodeTaint
	UpdateNodeCondition
	All    ActionType = 1<<iota - 1
	Update            = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition
)

// Matches reports whether e covers a change of resource by action.
func (e ClusterEvent) Matches(resource string, action ActionType) bool {
	return (e.Resource == "*" || e.Resource == resource) && e.ActionType&action != 0
}

// BindPlugin binds a pod. Skip passes to the next binder; the last is the
// scheduler's own, which appends a Bound event.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
}

// NodeScore is one node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// Score bounds, as in kube-scheduler.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// CycleState carries data between one pod's extension points. Reads are
// safe while Filter and Score run in parallel; plugins write in PreFilter
// and PreScore.
type CycleState struct {
	// Snapshot is what the cycle sees.
	Snapshot *Snapshot
	// Cycle numbers the cycle; plugins that cache per pod key on it.
	Cycle                 uint64
	mu                    sync.RWMutex
	data                  map[string]any
	skipFilter, skipScore map[string]bool
}

// NewCycleState returns an empty state over snap.
func NewCycleState(snap *Snapshot, cycle uint64) *CycleState {
	return &CycleState{Snapshot: snap, Cycle: cycle, data: map[string]any{}, skipFilter: map[string]bool{}, skipScore: map[string]bool{}}
}

// Read returns what a plugin wrote under key.
func (c *CycleState) Read(key string) (any, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.data[key]
	return v, ok
}

// Write stores v under key.
func (c *CycleState) Write(key string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data[key] = v
}
