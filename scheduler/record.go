package scheduler

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Record is a decision as a Bound event's detail records it, with the
// assumed pods the snapshot counted beyond its sequence (a replay adds them
// back to the state at SnapshotSequence).
func Record(d *Decision, cycle uint64, assumed []AssumedPod) (*structpb.Struct, error) {
	// Built as structpb values directly: this runs once per placement.
	str, num := structpb.NewStringValue, structpb.NewNumberValue
	obj := func(f map[string]*structpb.Value) *structpb.Value {
		return structpb.NewStructValue(&structpb.Struct{Fields: f})
	}
	list := func(v []*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: v})
	}
	counts := func(m map[string]int) *structpb.Value {
		f := make(map[string]*structpb.Value, len(m))
		for k, n := range m {
			f[k] = num(float64(n))
		}
		return obj(f)
	}
	// A node's score is one string, "node=score": a Struct per node
	// cost each Bound event five more values to build, store and decode
	// (records written before read as {node, score}; ParseRecord reads
	// both). Node names never hold "=".
	var buf []byte
	nodeScores := func(ns []NodeScore) *structpb.Value {
		out := make([]*structpb.Value, len(ns))
		for i, s := range ns {
			buf = appendNodeScore(buf[:0], s)
			out[i] = str(string(buf))
		}
		return list(out)
	}
	vers := make(map[string]*structpb.Value, len(d.Versions))
	for p, v := range d.Versions {
		vers[p] = str(v)
	}
	scores := make([]*structpb.Value, 0, len(d.Scores))
	for _, s := range d.Scores {
		scores = append(scores, obj(map[string]*structpb.Value{"plugin": str(s.Plugin), "weight": num(float64(s.Weight)), "top": nodeScores(s.Top)}))
	}
	// The assumed pods as one object, pod → node: a cycle counts every
	// placement still in flight (tens in a burst), and a Struct per pod
	// cost each Bound event several values per pod to build, store and
	// fold.
	as := make(map[string]*structpb.Value, len(assumed))
	for _, a := range assumed {
		as[a.Pod] = str(a.Node)
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"pod": str(d.Pod), "profile": str(d.Profile), "node": str(d.Node), "cycle": num(float64(cycle)),
		"snapshotSequence": num(float64(d.SnapshotSequence)), "startIndex": num(float64(d.StartIndex)),
		"numNodes": num(float64(d.NumNodes)), "evaluated": num(float64(d.Evaluated)), "feasible": num(float64(d.Feasible)),
		"rejections": counts(d.Rejections), "rejectedBy": counts(d.RejectedBy), "scores": list(scores), "totals": nodeScores(d.Totals),
		"versions": obj(vers), "assumedOn": obj(as),
	}}, nil
}

// appendNodeScore appends s as a decision records it, "node=score".
func appendNodeScore(b []byte, s NodeScore) []byte {
	return strconv.AppendInt(append(append(b, s.Name...), '='), s.Score, 10)
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
	s, err := decodedRecord(s)
	if err != nil {
		return nil, fmt.Errorf("the event's decision does not decode: %w", err)
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
	for p, n := range asMap(m["assumedOn"]) {
		node, _ := n.(string)
		d.Assumed = append(d.Assumed, AssumedPod{Pod: p, Node: node})
	}
	// Records written before assumedOn: a list of {pod, node}.
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

// parseScores reads a list of node scores: "node=score" strings, or
// {node, score} objects as records before those strings hold them.
func parseScores(v any) []NodeScore {
	var out []NodeScore
	for _, e := range asList(v) {
		if ns, ok := e.(string); ok {
			i := strings.LastIndexByte(ns, '=')
			if i < 0 {
				out = append(out, NodeScore{Name: ns})
				continue
			}
			s, _ := strconv.ParseInt(ns[i+1:], 10, 64)
			out = append(out, NodeScore{Name: ns[:i], Score: s})
			continue
		}
		m := asMap(e)
		n, _ := m["node"].(string)
		s, _ := m["score"].(float64)
		out = append(out, NodeScore{Name: n, Score: int64(s)})
	}
	return out
}
