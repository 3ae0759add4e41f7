package scheduler

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/types/known/structpb"
)

// Record is a decision as a Bound event's detail records it, with the
// assumed pods the snapshot counted beyond its sequence (a replay adds them
// back to the state at SnapshotSequence).
func Record(d *Decision, cycle uint64, assumed []AssumedPod) (*structpb.Struct, error) {
	rej := map[string]any{}
	for r, n := range d.Rejections {
		rej[r] = n
	}
	by := map[string]any{}
	for p, n := range d.RejectedBy {
		by[p] = n
	}
	vers := map[string]any{}
	for p, v := range d.Versions {
		vers[p] = v
	}
	scores := []any{}
	for _, s := range d.Scores {
		scores = append(scores, map[string]any{"plugin": s.Plugin, "weight": s.Weight, "top": nodeScores(s.Top)})
	}
	as := []any{}
	for _, a := range assumed {
		as = append(as, map[string]any{"pod": a.Pod, "node": a.Node})
	}
	m := map[string]any{
		"pod": d.Pod, "profile": d.Profile, "node": d.Node, "cycle": cycle,
		"snapshotSequence": d.SnapshotSequence, "startIndex": d.StartIndex,
		"numNodes": d.NumNodes, "evaluated": d.Evaluated, "feasible": d.Feasible,
		"rejections": rej, "rejectedBy": by, "scores": scores, "totals": nodeScores(d.Totals),
		"versions": vers, "assumed": as,
	}
	return structpb.NewStruct(m)
}

func nodeScores(ns []NodeScore) []any {
	out := make([]any, len(ns))
	for i, s := range ns {
		out[i] = map[string]any{"node": s.Name, "score": s.Score}
	}
	return out
}

// RecordedDecision is a decision read back from a Bound event.
type RecordedDecision struct {
	Decision
	Cycle   uint64
	Assumed []AssumedPod
}

// ParseRecord reads a decision back from a Bound event's detail.
func ParseRecord(s *structpb.Struct) (*RecordedDecision, error) {
	if s == nil {
		return nil, fmt.Errorf("the event records no decision")
	}
	m := s.AsMap()
	num := func(k string) int64 { f, _ := m[k].(float64); return int64(f) }
	str := func(k string) string { v, _ := m[k].(string); return v }
	d := &RecordedDecision{Decision: Decision{
		Pod: str("pod"), Profile: str("profile"), Node: str("node"),
		SnapshotSequence: uint64(num("snapshotSequence")), StartIndex: int(num("startIndex")),
		NumNodes: int(num("numNodes")), Evaluated: int(num("evaluated")), Feasible: int(num("feasible")),
		Rejections: map[string]int{}, RejectedBy: map[string]int{}, Versions: map[string]string{},
	}, Cycle: uint64(num("cycle"))}
	if d.Pod == "" || d.Profile == "" {
		return nil, fmt.Errorf("the decision names no pod or profile")
	}
	for k, v := range asMap(m["rejections"]) {
		f, _ := v.(float64)
		d.Rejections[k] = int(f)
	}
	for k, v := range asMap(m["rejectedBy"]) {
		f, _ := v.(float64)
		d.RejectedBy[k] = int(f)
	}
	for k, v := range asMap(m["versions"]) {
		d.Versions[k], _ = v.(string)
	}
	for _, s := range asList(m["scores"]) {
		sm := asMap(s)
		w, _ := sm["weight"].(float64)
		name, _ := sm["plugin"].(string)
		d.Scores = append(d.Scores, PluginScores{Plugin: name, Weight: int64(w), Top: parseScores(sm["top"])})
	}
	d.Totals = parseScores(m["totals"])
	for _, a := range asList(m["assumed"]) {
		am := asMap(a)
		p, _ := am["pod"].(string)
		n, _ := am["node"].(string)
		d.Assumed = append(d.Assumed, AssumedPod{Pod: p, Node: n})
	}
	sort.Slice(d.Assumed, func(i, j int) bool { return d.Assumed[i].Pod < d.Assumed[j].Pod })
	return d, nil
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }

func parseScores(v any) []NodeScore {
	var out []NodeScore
	for _, e := range asList(v) {
		m := asMap(e)
		n, _ := m["node"].(string)
		s, _ := m["score"].(float64)
		out = append(out, NodeScore{Name: n, Score: int64(s)})
	}
	return out
}
