package scheduler

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// attrs parses "k=v" words; a bare word is k=true.
func attrs(words []string) map[string]string {
	out := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			v = "true"
		}
		out[k] = v
	}
	return out
}

func kv(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(p, ":")
		if strings.Contains(p, "=") {
			k, v, _ = strings.Cut(p, "=")
		}
		out[k] = v
	}
	return out
}

func mustStruct(t testing.TB, v any) *structpb.Struct {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return s
}

// fixtureNode builds a Node object from attributes: cpu, memory, pods,
// labels=k=v,k=v, taints=k=v:Effect;k2:Effect, unschedulable, notready.
func fixtureNode(t testing.TB, name string, a map[string]string, rev uint64) *schemas.Object {
	t.Helper()
	alloc := map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"}
	for _, r := range []string{"cpu", "memory", "pods", "nvidia.com/gpu"} {
		if v, ok := a[r]; ok {
			alloc[r] = v
		}
	}
	spec := map[string]any{"allocatable": alloc}
	if a["unschedulable"] == "true" {
		spec["unschedulable"] = true
	}
	if ts := a["taints"]; ts != "" {
		var taints []map[string]string
		for _, t := range strings.Split(ts, ";") {
			kvs, effect, _ := strings.Cut(t, ":")
			k, v, _ := strings.Cut(kvs, "=")
			taints = append(taints, map[string]string{"key": k, "value": v, "effect": effect})
		}
		spec["taints"] = taints
	}
	o := &schemas.Object{ApiVersion: "v1", Kind: "Node",
		Metadata: &schemas.ObjectMeta{Name: name, Labels: kv(a["labels"]), ResourceVersion: rev},
		Spec:     mustStruct(t, spec), Status: &schemas.Status{}}
	if a["notready"] == "true" {
		o.Status.Conditions = []*schemas.Condition{{Type: "Ready", Status: "False"}}
	}
	return o
}

// fixturePod builds a Pod object: cpu, memory, labels, selector=k=v,
// tolerate=k=v:Effect;k:Exists, require=key=v1|v2, prefer=key=v:weight,
// spread=topologyKey:maxSkew:DoNotSchedule|ScheduleAnyway:k=v, node=NAME,
// scheduler=NAME.
func fixturePod(t testing.TB, key string, a map[string]string, rev uint64) *schemas.Object {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	req := map[string]string{}
	for _, r := range []string{"cpu", "memory", "nvidia.com/gpu"} {
		if v, ok := a[r]; ok {
			req[r] = v
		}
	}
	ctr := map[string]any{"name": "app", "image": "app"}
	if len(req) > 0 {
		ctr["resources"] = map[string]any{"requests": req}
	}
	spec := map[string]any{"containers": []any{ctr}}
	if s := a["selector"]; s != "" {
		spec["nodeSelector"] = kv(s)
	}
	if n := a["node"]; n != "" {
		spec["nodeName"] = n
	}
	if n := a["scheduler"]; n != "" {
		spec["schedulerName"] = n
	}
	if ts := a["tolerate"]; ts != "" {
		var tols []map[string]string
		for _, t := range strings.Split(ts, ";") {
			kvs, effect, _ := strings.Cut(t, ":")
			k, v, hasV := strings.Cut(kvs, "=")
			tol := map[string]string{"key": k, "effect": effect}
			if effect == "Exists" {
				tol = map[string]string{"key": k, "operator": "Exists"}
			} else if hasV {
				tol["operator"], tol["value"] = "Equal", v
			} else {
				tol["operator"] = "Exists"
			}
			tols = append(tols, tol)
		}
		spec["tolerations"] = tols
	}
	aff := map[string]any{}
	if r := a["require"]; r != "" {
		k, vs, _ := strings.Cut(r, "=")
		aff["requiredDuringSchedulingIgnoredDuringExecution"] = map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": k, "operator": "In", "values": strings.Split(vs, "|")}}}}}
	}
	if p := a["prefer"]; p != "" {
		kvs, w, _ := strings.Cut(p, ":")
		k, v, _ := strings.Cut(kvs, "=")
		weight, _ := strconv.Atoi(w)
		aff["preferredDuringSchedulingIgnoredDuringExecution"] = []any{map[string]any{"weight": weight,
			"preference": map[string]any{"matchExpressions": []any{map[string]any{"key": k, "operator": "In", "values": []string{v}}}}}}
	}
	if len(aff) > 0 {
		spec["affinity"] = map[string]any{"nodeAffinity": aff}
	}
	if s := a["spread"]; s != "" {
		var cs []any
		for _, c := range strings.Split(s, ";") {
			parts := strings.SplitN(c, ":", 4)
			if len(parts) != 4 {
				t.Fatalf("spread %q: want topologyKey:maxSkew:when:k=v", c)
			}
			skew, _ := strconv.Atoi(parts[1])
			cs = append(cs, map[string]any{"topologyKey": parts[0], "maxSkew": skew, "whenUnsatisfiable": parts[2],
				"labelSelector": map[string]any{"matchLabels": kv(parts[3])}})
		}
		spec["topologySpreadConstraints"] = cs
	}
	return &schemas.Object{ApiVersion: "v1", Kind: "Pod",
		Metadata: &schemas.ObjectMeta{Name: name, Namespace: ns, Labels: kv(a["labels"]), ResourceVersion: rev, Uid: fmt.Sprintf("uid-%s", name)},
		Spec:     mustStruct(t, spec), Status: &schemas.Status{}}
}
