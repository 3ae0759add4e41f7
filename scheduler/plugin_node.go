package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// NodeName rejects every node but the one a pod names in spec.nodeName.
type NodeName struct{}

// Name implements Plugin.
func (NodeName) Name() string { return "NodeName" }

// Version implements Versioned.
func (NodeName) Version() string { return builtinVersion }

// ErrReasonNodeName is NodeName's rejection.
const ErrReasonNodeName = "node(s) didn't match the requested node name"

// Filter implements FilterPlugin.
func (NodeName) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if pod.Pod.Spec.NodeName == "" || pod.Pod.Spec.NodeName == node.Name() {
		return nil
	}
	return NewStatus(UnschedulableAndUnresolvable, ErrReasonNodeName)
}

// NodeUnschedulable rejects cordoned nodes (spec.unschedulable) unless the
// pod tolerates node.kubernetes.io/unschedulable.
type NodeUnschedulable struct{}

// Name implements Plugin.
func (NodeUnschedulable) Name() string { return "NodeUnschedulable" }

// Version implements Versioned.
func (NodeUnschedulable) Version() string { return builtinVersion }

// ErrReasonUnschedulable is NodeUnschedulable's rejection.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// Filter implements FilterPlugin.
func (NodeUnschedulable) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if !node.Unschedulable() {
		return nil
	}
	taint := v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if tolerated(pod.Pod.Spec.Tolerations, &taint) {
		return nil
	}
	return NewStatus(UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
