package scheduler

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, mod func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("3")}}}
	if mod != nil {
		mod(n)
	}
	return n
}

func pod(name string, mod func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func requests(cpu, mem string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
		}
	}
}

func TestFilterPlugins(t *testing.T) {
	gpuTaint := func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "gpu", Value: "yes", Effect: v1.TaintEffectNoSchedule}}
	}
	tests := []struct {
		name     string
		plugin   FilterPlugin
		pod      *v1.Pod
		node     *v1.Node
		existing []*v1.Pod
		want     Code
		reason   string
	}{
		{"fit: fits", &NodeResourcesFit{}, pod("p", requests("1", "1Gi")), node("n", nil), nil, Success, ""},
		{"fit: cpu", &NodeResourcesFit{}, pod("p", requests("3", "")), node("n", nil), nil, Unschedulable, "Insufficient cpu"},
		{"fit: memory counts pods on the node", &NodeResourcesFit{}, pod("p", requests("", "2Gi")), node("n", nil),
			[]*v1.Pod{pod("a", requests("", "3Gi"))}, Unschedulable, "Insufficient memory"},
		{"fit: pod count", &NodeResourcesFit{}, pod("p", nil), node("n", nil),
			[]*v1.Pod{pod("a", nil), pod("b", nil), pod("c", nil)}, Unschedulable, "Too many pods"},
		{"fit: init container max", &NodeResourcesFit{}, pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}
		}), node("n", nil), nil, Unschedulable, "Insufficient cpu"},
		{"fit: extended resource", &NodeResourcesFit{}, pod("p", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}), node("n", nil), nil, Unschedulable, "Insufficient nvidia.com/gpu"},
		{"node name: other", NodeName{}, pod("p", func(p *v1.Pod) { p.Spec.NodeName = "m" }), node("n", nil), nil, UnschedulableAndUnresolvable, ErrReasonNodeName},
		{"node name: same", NodeName{}, pod("p", func(p *v1.Pod) { p.Spec.NodeName = "n" }), node("n", nil), nil, Success, ""},
		{"unschedulable", NodeUnschedulable{}, pod("p", nil), node("n", func(n *v1.Node) { n.Spec.Unschedulable = true }), nil, UnschedulableAndUnresolvable, ErrReasonUnschedulable},
		{"unschedulable: tolerated", NodeUnschedulable{}, pod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists}}
		}), node("n", func(n *v1.Node) { n.Spec.Unschedulable = true }), nil, Success, ""},
		{"taint: untolerated", TaintToleration{}, pod("p", nil), node("n", gpuTaint), nil, UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: yes}"},
		{"taint: tolerated by value", TaintToleration{}, pod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpEqual, Value: "yes", Effect: v1.TaintEffectNoSchedule}}
		}), node("n", gpuTaint), nil, Success, ""},
		{"taint: wrong value", TaintToleration{}, pod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpEqual, Value: "no"}}
		}), node("n", gpuTaint), nil, UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: yes}"},
		{"taint: PreferNoSchedule does not filter", TaintToleration{}, pod("p", nil), node("n", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
		}), nil, Success, ""},
		{"affinity: selector", NodeAffinity{}, pod("p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node("n", nil), nil, UnschedulableAndUnresolvable, ErrReasonNodeAffinity},
		{"affinity: selector matches", NodeAffinity{}, pod("p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node("n", func(n *v1.Node) { n.Labels["disk"] = "ssd" }), nil, Success, ""},
		{"affinity: required NotIn", NodeAffinity{}, pod("p", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}}}}}}}
		}), node("n", func(n *v1.Node) { n.Labels["zone"] = "a" }), nil, UnschedulableAndUnresolvable, ErrReasonNodeAffinity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pis []*PodInfo
			for _, e := range tc.existing {
				pis = append(pis, NewPodInfo(e))
			}
			ni := NewNodeInfo(tc.node, 1, pis...)
			state := NewCycleState(NewSnapshot(1, []*NodeInfo{ni}), 1)
			pi := NewPodInfo(tc.pod)
			if pf, ok := tc.plugin.(PreFilterPlugin); ok {
				pf.PreFilter(context.Background(), state, pi)
			}
			st := tc.plugin.Filter(context.Background(), state, pi, ni)
			if st.GetCode() != tc.want || (tc.reason != "" && st.Message() != tc.reason) {
				t.Fatalf("got %v %q, want %v %q", st.GetCode(), st.Message(), tc.want, tc.reason)
			}
		})
	}
}

func TestScorePlugins(t *testing.T) {
	half := []*v1.Pod{pod("a", requests("1", "2Gi"))}
	tests := []struct {
		name     string
		plugin   ScorePlugin
		pod      *v1.Pod
		existing []*v1.Pod
		want     int64
	}{
		{"least allocated, empty node", &NodeResourcesFit{}, pod("p", requests("1", "2Gi")), nil, 50},
		{"least allocated, half used", &NodeResourcesFit{}, pod("p", requests("1", "2Gi")), half, 0},
		{"most allocated, half used", &NodeResourcesFit{Strategy: MostAllocated}, pod("p", requests("1", "2Gi")), half, 100},
		{"most allocated, defaults for no requests", &NodeResourcesFit{Strategy: MostAllocated}, pod("p", nil), nil, (100*100/2000 + 200*100/4096) / 2},
		{"balanced, even", &BalancedAllocation{}, pod("p", requests("1", "2Gi")), nil, 100},
		{"balanced, uneven", &BalancedAllocation{}, pod("p", requests("2", "0")), nil, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pis []*PodInfo
			for _, e := range tc.existing {
				pis = append(pis, NewPodInfo(e))
			}
			ni := NewNodeInfo(node("n", nil), 1, pis...)
			got, st := tc.plugin.Score(context.Background(), NewCycleState(NewSnapshot(1, []*NodeInfo{ni}), 1), NewPodInfo(tc.pod), ni)
			if !st.IsSuccess() || got != tc.want {
				t.Fatalf("score %d (%v), want %d", got, st, tc.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name    string
		in      []int64
		reverse bool
		want    []int64
	}{
		{"scale", []int64{0, 5, 10}, false, []int64{0, 50, 100}},
		{"reverse", []int64{0, 5, 10}, true, []int64{100, 50, 0}},
		{"all zero reversed", []int64{0, 0}, true, []int64{100, 100}},
		{"all zero", []int64{0, 0}, false, []int64{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := make([]NodeScore, len(tc.in))
			for i, v := range tc.in {
				s[i].Score = v
			}
			normalize(s, tc.reverse)
			for i := range s {
				if s[i].Score != tc.want[i] {
					t.Fatalf("got %v, want %v", s, tc.want)
				}
			}
		})
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct {
		pct         int32
		nodes, want int
	}{
		{0, 50, 50}, {0, 1000, 420}, {0, 5000, 500}, {0, 6000, 300}, {0, 200, 100}, {100, 5000, 5000}, {10, 5000, 500},
	}
	for _, tc := range tests {
		p := &Profile{PercentageOfNodesToScore: tc.pct}
		if got := p.numFeasibleNodesToFind(tc.nodes); got != tc.want {
			t.Errorf("pct %d, %d nodes: %d, want %d", tc.pct, tc.nodes, got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "profiles:\n- schedulerNam: x\n", "line 2: profiles[0].schedulerNam: unknown field; the fields of profiles[0] are schedulerName, percentageOfNodesToScore, plugins, pluginConfig"},
		{"unknown nested field", "profiles:\n- plugins:\n    scores: {}\n", "line 3: profiles[0].plugins.scores: unknown field; the fields of profiles[0].plugins are multiPoint, preFilter, filter,"},
		{"unknown top-level field", "profile: []\n", "line 1: profile: unknown field; the fields of the top level are apiVersion, kind, parallelism, percentageOfNodesToScore, profiles"},
		{"unknown plugin", "profiles:\n- plugins:\n    filter:\n      enabled: [{name: Nope}]\n", `unknown plugin "Nope"`},
		{"bad strategy", "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Random}}\n", "scoringStrategy.type"},
		{"duplicate profile", "profiles:\n- schedulerName: a\n- schedulerName: a\n", "used twice"},
		{"percentage", "percentageOfNodesToScore: 120\n", "not in [0, 100]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				_, err = cfg.Build(DefaultRegistry())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}
