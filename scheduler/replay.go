package scheduler

import (
	"context"
	"fmt"
	"sort"

	"github.com/jetplane/jetplane/schemas"
)

// ReplayInput is what a replay needs from the log, all read by the caller:
// the pod as it was scheduled (the version the Bound event expected), the
// Nodes and Pods of the state at the decision's snapshot sequence, and the
// Pods of the state right after the Bound event, where the assumed pods
// the decision counted are bound.
type ReplayInput struct {
	Pod          *schemas.Object
	NodesAtSnap  []*schemas.Object
	PodsAtSnap   []*schemas.Object
	PodsAtBound  []*schemas.Object
	Recorded     *RecordedDecision
	Profiles     map[string]*Profile
	BoundEventAt uint64
}

// Replay re-runs a recorded cycle on the state it saw and returns the new
// decision.
func Replay(ctx context.Context, in ReplayInput) (*Decision, error) {
	rec := in.Recorded
	prof := in.Profiles[rec.Profile]
	if prof == nil {
		return nil, fmt.Errorf("profile %q is not configured here; pass the scheduler config it ran with", rec.Profile)
	}
	cache := NewCache()
	for _, o := range in.NodesAtSnap {
		node, err := NodeFromObject(o)
		if err != nil {
			return nil, err
		}
		cache.SetNode(node, o.GetMetadata().GetResourceVersion())
	}
	for _, o := range in.PodsAtSnap {
		if o.GetStatus().GetGoal() == "deleted" {
			continue
		}
		pod, err := PodFromObject(o)
		if err != nil {
			return nil, err
		}
		cache.SetPod(pod, o.GetMetadata().GetResourceVersion())
	}
	bound := map[string]*schemas.Object{}
	for _, o := range in.PodsAtBound {
		bound[o.GetMetadata().GetNamespace()+"/"+o.GetMetadata().GetName()] = o
	}
	for _, a := range rec.Assumed {
		o := bound[a.Pod]
		if o == nil {
			return nil, fmt.Errorf("assumed pod %s is not in the state after the Bound event", a.Pod)
		}
		pod, err := PodFromObject(o)
		if err != nil {
			return nil, err
		}
		cache.Assume(NewPodInfo(pod), a.Node)
	}
	cache.SetSequence(rec.SnapshotSequence)
	pod, err := PodFromObject(in.Pod)
	if err != nil {
		return nil, err
	}
	pod.Spec.NodeName = ""
	return Cycle(ctx, prof, NewCycleState(cache.Snapshot(), rec.Cycle), NewPodInfo(pod), rec.StartIndex), nil
}

// Differences lists how a replayed decision differs from the recorded one:
// plugin versions first (the likely cause), then the node, the nodes
// looked at, rejections and the best totals. Empty means it is the same.
func Differences(rec *RecordedDecision, d *Decision) []string {
	var out []string
	names := map[string]bool{}
	for n := range rec.Versions {
		names[n] = true
	}
	for n := range d.Versions {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		was, wok := rec.Versions[n]
		is, iok := d.Versions[n]
		switch {
		case !wok:
			out = append(out, fmt.Sprintf("plugin %s was added (%s)", n, is))
		case !iok:
			out = append(out, fmt.Sprintf("plugin %s was removed (was %s)", n, was))
		case was != is:
			out = append(out, fmt.Sprintf("plugin %s changed: %s, was %s", n, is, was))
		}
	}
	if rec.Node != d.Node {
		out = append(out, fmt.Sprintf("node %s, was %s", orNone(d.Node), orNone(rec.Node)))
	}
	if rec.Evaluated != d.Evaluated || rec.Feasible != d.Feasible || rec.NumNodes != d.NumNodes {
		out = append(out, fmt.Sprintf("%d of %d nodes evaluated, %d feasible; was %d of %d, %d feasible",
			d.Evaluated, d.NumNodes, d.Feasible, rec.Evaluated, rec.NumNodes, rec.Feasible))
	}
	reasons := map[string]bool{}
	for r := range rec.Rejections {
		reasons[r] = true
	}
	for r := range d.Rejections {
		reasons[r] = true
	}
	rs := make([]string, 0, len(reasons))
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	for _, r := range rs {
		if rec.Rejections[r] != d.Rejections[r] {
			out = append(out, fmt.Sprintf("%q rejects %d nodes, was %d", r, d.Rejections[r], rec.Rejections[r]))
		}
	}
	if fmt.Sprint(rec.Totals) != fmt.Sprint(d.Totals) {
		out = append(out, fmt.Sprintf("best totals %v, were %v", d.Totals, rec.Totals))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
