package scheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// TaintToleration rejects nodes with a NoSchedule or NoExecute taint the
// pod does not tolerate, and prefers nodes with fewer untolerated
// PreferNoSchedule taints.
type TaintToleration struct{}

// Name implements Plugin.
func (TaintToleration) Name() string { return "TaintToleration" }

// Version implements Versioned.
func (TaintToleration) Version() string { return builtinVersion }

// Filter implements FilterPlugin.
func (TaintToleration) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	taints := node.Taints()
	for i := range taints {
		t := &taints[i]
		if t.Effect != v1.TaintEffectNoSchedule && t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(pod.Pod.Spec.Tolerations, t) {
			return NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value))
		}
	}
	return nil
}

// Score implements ScorePlugin: the count of untolerated PreferNoSchedule
// taints, turned around by NormalizeScore so that fewer is better.
func (TaintToleration) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	var n int64
	taints := node.Taints()
	for i := range taints {
		t := &taints[i]
		if t.Effect == v1.TaintEffectPreferNoSchedule && !tolerated(pod.Pod.Spec.Tolerations, t) {
			n++
		}
	}
	return n, nil
}

// NormalizeScore implements NormalizeScorePlugin.
func (TaintToleration) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	normalize(scores, true)
	return nil
}

// normalize scales scores to [0, MaxNodeScore] by the highest; reverse
// makes the lowest raw score the best.
func normalize(scores []NodeScore, reverse bool) {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s.Score)
	}
	for i := range scores {
		switch {
		case hi == 0 && reverse:
			scores[i].Score = MaxNodeScore
		case hi == 0:
		case reverse:
			scores[i].Score = MaxNodeScore - scores[i].Score*MaxNodeScore/hi
		default:
			scores[i].Score = scores[i].Score * MaxNodeScore / hi
		}
	}
}

// tolerated reports whether one of tolerations tolerates taint, with
// Kubernetes' matching rules (empty key with Exists matches every taint,
// an empty effect matches every effect).
func tolerated(tolerations []v1.Toleration, taint *v1.Taint) bool {
	for i := range tolerations {
		t := &tolerations[i]
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key != "" && t.Key != taint.Key {
			continue
		}
		switch t.Operator {
		case v1.TolerationOpExists:
			return true
		case v1.TolerationOpEqual, "":
			if t.Key != "" && t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}
