package scheduler

import (
	"context"
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// NodeResourcesFit rejects nodes without room for the pod's requests and
// scores the rest by one of kube-scheduler's strategies.
type NodeResourcesFit struct {
	// Strategy is LeastAllocated (default), MostAllocated or
	// RequestedToCapacityRatio is not supported.
	Strategy ScoringStrategy
	// Resources weighs each resource in the score (default cpu 1, memory 1).
	Resources []ResourceWeight
}

// ScoringStrategy is how NodeResourcesFit scores.
type ScoringStrategy string

// Scoring strategies.
const (
	LeastAllocated ScoringStrategy = "LeastAllocated"
	MostAllocated  ScoringStrategy = "MostAllocated"
)

// ResourceWeight is one resource and its weight in a score.
type ResourceWeight struct {
	Name   v1.ResourceName `json:"name"`
	Weight int64           `json:"weight"`
}

var defaultResources = []ResourceWeight{{Name: v1.ResourceCPU, Weight: 1}, {Name: v1.ResourceMemory, Weight: 1}}

// Name implements Plugin.
func (*NodeResourcesFit) Name() string { return "NodeResourcesFit" }

// Version implements Versioned; it names the strategy, which changes
// decisions as much as code does.
func (f *NodeResourcesFit) Version() string {
	s := f.Strategy
	if s == "" {
		s = LeastAllocated
	}
	return builtinVersion + "+" + string(s)
}

// Filter implements FilterPlugin.
func (*NodeResourcesFit) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	reasons := Insufficient(pod.Requests, node)
	if len(reasons) == 0 {
		return nil
	}
	return NewStatus(Unschedulable, reasons...)
}

// Insufficient lists what node lacks for a pod requesting req, in
// kube-scheduler's words ("Too many pods", "Insufficient cpu").
func Insufficient(req Resources, node *NodeInfo) []string {
	var reasons []string
	alloc, used := node.Allocatable, node.Requested
	if alloc.Pods > 0 && used.Pods+1 > alloc.Pods {
		reasons = append(reasons, "Too many pods")
	}
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory {
		reasons = append(reasons, "Insufficient memory")
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	if len(req.Scalar) > 0 {
		names := make([]string, 0, len(req.Scalar))
		for name, v := range req.Scalar {
			if v > 0 && v > alloc.Scalar[name]-used.Scalar[name] {
				names = append(names, string(name))
			}
		}
		sort.Strings(names)
		for _, n := range names {
			reasons = append(reasons, fmt.Sprintf("Insufficient %s", n))
		}
	}
	return reasons
}

// Score implements ScorePlugin.
func (f *NodeResourcesFit) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	res := f.Resources
	if len(res) == 0 {
		res = defaultResources
	}
	var sum, weights int64
	for _, rw := range res {
		alloc, req := resourcePair(rw.Name, pod, node)
		if alloc == 0 {
			continue
		}
		var s int64
		switch f.Strategy {
		case MostAllocated:
			s = mostRequestedScore(req, alloc)
		default:
			s = leastRequestedScore(req, alloc)
		}
		sum += s * rw.Weight
		weights += rw.Weight
	}
	if weights == 0 {
		return 0, nil
	}
	return sum / weights, nil
}

// resourcePair is a node's allocatable amount of a resource and what it
// would have requested with the pod placed (counting default requests for
// cpu and memory, as kube-scheduler's scoring does).
func resourcePair(name v1.ResourceName, pod *PodInfo, node *NodeInfo) (alloc, req int64) {
	switch name {
	case v1.ResourceCPU:
		return node.Allocatable.MilliCPU, node.NonZeroRequested.MilliCPU + pod.NonZero.MilliCPU
	case v1.ResourceMemory:
		return node.Allocatable.Memory, node.NonZeroRequested.Memory + pod.NonZero.Memory
	case v1.ResourceEphemeralStorage:
		return node.Allocatable.EphemeralStorage, node.Requested.EphemeralStorage + pod.Requests.EphemeralStorage
	default:
		return node.Allocatable.Scalar[name], node.Requested.Scalar[name] + pod.Requests.Scalar[name]
	}
}

func leastRequestedScore(req, alloc int64) int64 {
	if req > alloc {
		return 0
	}
	return (alloc - req) * MaxNodeScore / alloc
}

func mostRequestedScore(req, alloc int64) int64 {
	if req > alloc {
		req = alloc
	}
	return req * MaxNodeScore / alloc
}

// BalancedAllocation favours nodes whose resources would be used evenly
// with the pod placed: 100 × (1 − the standard deviation of the requested
// fractions).
type BalancedAllocation struct {
	Resources []ResourceWeight
}

// Name implements Plugin.
func (*BalancedAllocation) Name() string { return "NodeResourcesBalancedAllocation" }

// Version implements Versioned.
func (*BalancedAllocation) Version() string { return builtinVersion }

// Score implements ScorePlugin.
func (b *BalancedAllocation) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	res := b.Resources
	if len(res) == 0 {
		res = defaultResources
	}
	fractions := make([]float64, 0, len(res))
	for _, rw := range res {
		alloc, req := resourcePair(rw.Name, pod, node)
		if alloc == 0 {
			continue
		}
		f := float64(req) / float64(alloc)
		if f > 1 {
			f = 1
		}
		fractions = append(fractions, f)
	}
	var std float64
	switch len(fractions) {
	case 0, 1:
	case 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	default:
		var mean float64
		for _, f := range fractions {
			mean += f
		}
		mean /= float64(len(fractions))
		var v float64
		for _, f := range fractions {
			v += (f - mean) * (f - mean)
		}
		std = math.Sqrt(v / float64(len(fractions)))
	}
	return int64((1 - std) * float64(MaxNodeScore)), nil
}

// builtinVersion is the version of every built-in plugin; bump it when a
// built-in's decisions change.
const builtinVersion = "builtin/1"
