package helmrelease

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// dataKey reads ref.Key of a ConfigMap (spec.data) or Secret (spec.data,
// base64, or spec.stringData).
func dataKey(o *schemas.Object, ref ValuesRef) (string, bool, error) {
	fields := o.GetSpec().GetFields()
	if ref.Kind == "Secret" {
		if v, ok := fields["stringData"].GetStructValue().GetFields()[ref.Key]; ok {
			return v.GetStringValue(), true, nil
		}
		v, ok := fields["data"].GetStructValue().GetFields()[ref.Key]
		if !ok {
			return "", false, nil
		}
		b, err := base64.StdEncoding.DecodeString(v.GetStringValue())
		if err != nil {
			return "", false, fmt.Errorf("Secret %s data[%q]: not base64: %v", o.GetMetadata().GetName(), ref.Key, err)
		}
		return string(b), true, nil
	}
	v, ok := fields["data"].GetStructValue().GetFields()[ref.Key]
	return v.GetStringValue(), ok, nil
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}

// valuesDiff describes what changed in the release's spec (chart, values,
// values sources) from the revision before obj's, as recorded in the log:
// "" for the first revision. Answers are cached per revision.
func (r *Reconciler) valuesDiff(ctx context.Context, key projections.Key, obj *schemas.Object) (string, error) {
	gen := obj.GetMetadata().GetGeneration()
	if gen <= 1 {
		return "", nil
	}
	r.mu.Lock()
	d, ok := r.diffs[key]
	r.mu.Unlock()
	if ok && d.generation == gen {
		return d.text, nil
	}
	evs, err := r.cfg.History(ctx, key)
	if err != nil {
		return "", err
	}
	// The spec before the current one: the last Applied event whose
	// generation is lower.
	var prev *schemas.Object
	for _, ev := range evs {
		o := ev.GetObject()
		if ev.GetType() == schemas.EventType_EVENT_TYPE_APPLIED && o.GetMetadata().GetGeneration() < gen {
			prev = o
		}
	}
	text := ""
	if prev != nil {
		text = DiffSpecs(prev.GetSpec().AsMap(), obj.GetSpec().AsMap())
	}
	r.mu.Lock()
	r.diffs[key] = cachedDiff{generation: gen, text: text}
	r.mu.Unlock()
	return text, nil
}

type cachedDiff struct {
	generation int64
	text       string
}

// DiffSpecs describes the changes from one HelmRelease spec to another:
// "values: .replicas 2 → 3, .image.tag removed; chart.version 0.1.0 →
// 0.2.0". Empty when nothing changed.
func DiffSpecs(prev, next map[string]any) string {
	var parts []string
	pv, _ := prev["values"].(map[string]any)
	nv, _ := next["values"].(map[string]any)
	if d := diffValues("", pv, nv); len(d) > 0 {
		parts = append(parts, "values: "+strings.Join(d, ", "))
	}
	pc, _ := prev["chart"].(map[string]any)
	nc, _ := next["chart"].(map[string]any)
	for _, f := range []string{"name", "version", "repository"} {
		if a, b := fmt.Sprint(pc[f]), fmt.Sprint(nc[f]); a != b {
			parts = append(parts, fmt.Sprintf("chart.%s %s → %s", f, show(pc[f]), show(nc[f])))
		}
	}
	for _, f := range []string{"valuesFrom", "releaseNamespace", "cluster"} {
		if a, b := encode(prev[f]), encode(next[f]); a != b {
			parts = append(parts, fmt.Sprintf("%s %s → %s", f, show(prev[f]), show(next[f])))
		}
	}
	return strings.Join(parts, "; ")
}

func diffValues(path string, a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		p := path + "." + k
		av, inA := a[k]
		bv, inB := b[k]
		am, aMap := av.(map[string]any)
		bm, bMap := bv.(map[string]any)
		switch {
		case !inA:
			out = append(out, p+" added "+show(bv))
		case !inB:
			out = append(out, p+" removed")
		case aMap && bMap:
			out = append(out, diffValues(p, am, bm)...)
		case encode(av) != encode(bv):
			out = append(out, p+" "+show(av)+" → "+show(bv))
		}
	}
	return out
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// show prints a value briefly.
func show(v any) string {
	if v == nil {
		return "(none)"
	}
	s := encode(v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
