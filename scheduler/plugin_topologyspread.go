package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// PodTopologySpread keeps pods that match a constraint's selector spread
// over the constraint's topology domains (hostname, zone…): a node whose
// domain would exceed maxSkew is rejected (whenUnsatisfiable:
// DoNotSchedule) or scored down (ScheduleAnyway). Domains are counted over
// the nodes that match the pod's required node affinity, as kube-scheduler's
// default nodeAffinityPolicy Honor does.
type PodTopologySpread struct{}

// Name implements Plugin.
func (PodTopologySpread) Name() string { return "PodTopologySpread" }

// Version implements Versioned.
func (PodTopologySpread) Version() string { return builtinVersion }

// Rejections of PodTopologySpread.
const (
	ErrReasonTopologySpread      = "node(s) didn't match pod topology spread constraints"
	ErrReasonTopologyMissingKeys = "node(s) didn't match pod topology spread constraints (missing required label)"
)

type spreadConstraint struct {
	key      string
	maxSkew  int32
	selector labels.Selector
	selfHit  int
	counts   map[string]int
	min      int
}

type spreadState struct {
	hard, soft []*spreadConstraint
}

const spreadKey = "PreFilterPodTopologySpread"

func buildConstraints(pod *PodInfo, want v1.UnsatisfiableConstraintAction) ([]*spreadConstraint, *Status) {
	var out []*spreadConstraint
	for _, c := range pod.Pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != want {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, NewStatus(UnschedulableAndUnresolvable, "invalid topology spread selector: "+err.Error())
		}
		sc := &spreadConstraint{key: c.TopologyKey, maxSkew: c.MaxSkew, selector: sel, counts: map[string]int{}}
		if sel.Matches(labels.Set(pod.Pod.Labels)) {
			sc.selfHit = 1
		}
		out = append(out, sc)
	}
	return out, nil
}

// count fills each constraint's per-domain counts over the snapshot's
// nodes that match the pod's required affinity and carry every key.
func count(pod *PodInfo, snap *Snapshot, cs []*spreadConstraint) {
	if len(cs) == 0 {
		return
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	for _, n := range snap.Nodes() {
		if ok, _ := aff.Match(n.Node); !ok {
			continue
		}
		hasAll := true
		for _, c := range cs {
			if _, ok := n.Node.Labels[c.key]; !ok {
				hasAll = false
				break
			}
		}
		if !hasAll {
			continue
		}
		for _, c := range cs {
			dv := n.Node.Labels[c.key]
			c.counts[dv] += 0
			for _, p := range n.Pods {
				if p.Pod.Namespace == pod.Pod.Namespace && c.selector.Matches(labels.Set(p.Pod.Labels)) {
					c.counts[dv]++
				}
			}
		}
	}
	for _, c := range cs {
		first := true
		for _, v := range c.counts {
			if first || v < c.min {
				c.min, first = v, false
			}
		}
	}
}

// PreFilter implements PreFilterPlugin.
func (PodTopologySpread) PreFilter(_ context.Context, state *CycleState, pod *PodInfo) *Status {
	hard, st := buildConstraints(pod, v1.DoNotSchedule)
	if st != nil {
		return st
	}
	if len(hard) == 0 {
		return NewStatus(Skip)
	}
	count(pod, state.Snapshot, hard)
	state.Write(spreadKey, &spreadState{hard: hard})
	return nil
}

// Filter implements FilterPlugin.
func (PodTopologySpread) Filter(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) *Status {
	v, ok := state.Read(spreadKey)
	if !ok {
		return nil
	}
	for _, c := range v.(*spreadState).hard {
		dv, ok := node.Node.Labels[c.key]
		if !ok {
			return NewStatus(UnschedulableAndUnresolvable, ErrReasonTopologyMissingKeys)
		}
		if c.counts[dv]+c.selfHit-c.min > int(c.maxSkew) {
			return NewStatus(Unschedulable, ErrReasonTopologySpread)
		}
	}
	return nil
}

const spreadScoreKey = "PreScorePodTopologySpread"

// PreScore implements PreScorePlugin.
func (PodTopologySpread) PreScore(_ context.Context, state *CycleState, pod *PodInfo, _ []*NodeInfo) *Status {
	soft, st := buildConstraints(pod, v1.ScheduleAnyway)
	if st != nil {
		return st
	}
	if len(soft) == 0 {
		return NewStatus(Skip)
	}
	count(pod, state.Snapshot, soft)
	state.Write(spreadScoreKey, &spreadState{soft: soft})
	return nil
}

// Score implements ScorePlugin: the matching pods already in the node's
// domains; NormalizeScore makes fewer better.
func (PodTopologySpread) Score(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) (int64, *Status) {
	v, ok := state.Read(spreadScoreKey)
	if !ok {
		return 0, nil
	}
	var s int64
	for _, c := range v.(*spreadState).soft {
		if dv, ok := node.Node.Labels[c.key]; ok {
			s += int64(c.counts[dv])
		}
	}
	return s, nil
}

// NormalizeScore implements NormalizeScorePlugin.
func (PodTopologySpread) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = MaxNodeScore
			continue
		}
		scores[i].Score = MaxNodeScore * (hi - scores[i].Score) / (hi - lo)
	}
	return nil
}
