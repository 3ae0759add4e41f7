package scheduler

import (
	"context"

	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// NodeAffinity rejects nodes that do not match a pod's nodeSelector and
// required node affinity, and scores nodes by its preferred terms.
type NodeAffinity struct{}

// Name implements Plugin.
func (NodeAffinity) Name() string { return "NodeAffinity" }

// Version implements Versioned.
func (NodeAffinity) Version() string { return builtinVersion }

// ErrReasonNodeAffinity is NodeAffinity's rejection.
const ErrReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"

type nodeAffinityState struct {
	required  nodeaffinity.RequiredNodeAffinity
	preferred *nodeaffinity.PreferredSchedulingTerms
}

const nodeAffinityKey = "PreFilterNodeAffinity"

// PreFilter implements PreFilterPlugin: the pod's selector and terms are
// parsed once per cycle.
func (NodeAffinity) PreFilter(_ context.Context, state *CycleState, pod *PodInfo) *Status {
	s := &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod)}
	if a := pod.Pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return NewStatus(UnschedulableAndUnresolvable, "invalid preferred node affinity: "+err.Error())
		}
		s.preferred = terms
	}
	state.Write(nodeAffinityKey, s)
	return nil
}

func nodeAffinityOf(state *CycleState) *nodeAffinityState {
	v, ok := state.Read(nodeAffinityKey)
	if !ok {
		return nil
	}
	return v.(*nodeAffinityState)
}

// Filter implements FilterPlugin.
func (na NodeAffinity) Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	return nodeAffinityFor(state, pod).filter(node)
}

// FilterNodes implements BatchFilterPlugin: the cycle's state is read
// once for the nodes, not once per node.
func (NodeAffinity) FilterNodes(_ context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, out []*Status) {
	s := nodeAffinityFor(state, pod)
	for i, n := range nodes {
		out[i] = s.filter(n)
	}
}

// nodeAffinityFor is the cycle's parsed affinity, or the pod's required
// affinity when PreFilter did not run.
func nodeAffinityFor(state *CycleState, pod *PodInfo) *nodeAffinityState {
	if s := nodeAffinityOf(state); s != nil {
		return s
	}
	return &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod)}
}

func (s *nodeAffinityState) filter(node *NodeInfo) *Status {
	ok, err := s.required.Match(node.Node)
	if err != nil {
		return NewStatus(UnschedulableAndUnresolvable, "invalid node affinity: "+err.Error())
	}
	if !ok {
		return NewStatus(UnschedulableAndUnresolvable, ErrReasonNodeAffinity)
	}
	return nil
}

// Score implements ScorePlugin: the sum of the weights of the preferred
// terms the node matches.
func (NodeAffinity) Score(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) (int64, *Status) {
	s := nodeAffinityOf(state)
	if s == nil || s.preferred == nil {
		return 0, nil
	}
	return s.preferred.Score(node.Node), nil
}

// ScoreNodes implements BatchScorePlugin: the cycle's state is read once.
func (NodeAffinity) ScoreNodes(_ context.Context, state *CycleState, _ *PodInfo, nodes []*NodeInfo, scores []int64) *Status {
	s := nodeAffinityOf(state)
	for i, n := range nodes {
		if s == nil || s.preferred == nil {
			scores[i] = 0
			continue
		}
		scores[i] = s.preferred.Score(n.Node)
	}
	return nil
}

// NormalizeScore implements NormalizeScorePlugin.
func (NodeAffinity) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	normalize(scores, false)
	return nil
}

var (
	_ BatchFilterPlugin = NodeAffinity{}
	_ BatchScorePlugin  = NodeAffinity{}
)
