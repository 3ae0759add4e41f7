package apply

import (
	"encoding/base64"
	"maps"

	"k8s.io/apimachinery/pkg/api/resource"
)

// inSync reports whether live holds every field that desired sets, with
// the same value: then applying desired would change nothing we manage,
// and the apply is skipped. It is a cheap, conservative test, not server-
// side apply's merge: a difference it cannot rule out (a list that another
// manager extended, a value the apiserver normalized) makes it report
// false, and the apply that follows is a no-op at the apiserver.
//
// Fields the apiserver owns or ignores in an apply are skipped: apiVersion
// and kind (the GET used the same), status, and metadata other than labels
// and annotations. A zero or empty desired value matches an absent live
// field, since the apiserver omits them. Neither map is modified.
func inSync(desired, live map[string]any) bool {
	desired = secretDataOf(desired)
	for k, d := range desired {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			dm, _ := d.(map[string]any)
			lm, _ := live["metadata"].(map[string]any)
			if !covers(dm["labels"], lm["labels"], "labels") || !covers(dm["annotations"], lm["annotations"], "annotations") {
				return false
			}
		default:
			if !covers(d, live[k], k) {
				return false
			}
		}
	}
	return true
}

// covers reports whether l holds d: every field of a map, every element of
// a list of the same length, an equal scalar. key is the field d sits under
// (for the values of a quantity map, that map's field).
func covers(d, l any, key string) bool {
	switch d := d.(type) {
	case nil:
		return true
	case map[string]any:
		lm, ok := l.(map[string]any)
		if !ok {
			return l == nil && len(d) == 0
		}
		for k, v := range d {
			ck := k
			if quantityKeys[key] {
				ck = key // the values of requests, limits, ... are quantities
			}
			if !covers(v, lm[k], ck) {
				return false
			}
		}
		return true
	case []any:
		ls, ok := l.([]any)
		if !ok {
			return l == nil && len(d) == 0
		}
		if len(ls) != len(d) {
			return false
		}
		for i := range d {
			if !covers(d[i], ls[i], key) {
				return false
			}
		}
		return true
	case string:
		if l == nil {
			return d == ""
		}
		ls, ok := l.(string)
		if !ok {
			return false
		}
		return ls == d || quantityKeys[key] && sameQuantity(d, ls)
	case bool:
		if l == nil {
			return !d
		}
		lb, ok := l.(bool)
		return ok && lb == d
	case int64, float64:
		if l == nil {
			return toFloat(d) == 0
		}
		switch l.(type) {
		case int64, float64:
			return toFloat(d) == toFloat(l)
		}
		return false
	default:
		return false
	}
}

// quantityKeys are the fields whose values are resource quantities by
// name (a Pod's requests and limits, a ResourceQuota's hard), where the
// apiserver rewrites "0.5" as "500m". Elsewhere such strings are compared
// as written.
var quantityKeys = map[string]bool{"requests": true, "limits": true, "hard": true, "overhead": true, "capacity": true}

func sameQuantity(a, b string) bool {
	qa, err := resource.ParseQuantity(a)
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(b)
	return err == nil && qa.Cmp(qb) == 0
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// secretDataOf returns desired with a Secret's stringData folded into data
// (base64), as the apiserver stores it: stringData is write-only and never
// comes back. Other objects are returned as they are.
func secretDataOf(desired map[string]any) map[string]any {
	sd, ok := desired["stringData"].(map[string]any)
	if !ok || desired["kind"] != "Secret" || desired["apiVersion"] != "v1" {
		return desired
	}
	data := map[string]any{}
	if d, ok := desired["data"].(map[string]any); ok {
		maps.Copy(data, d)
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	out := maps.Clone(desired)
	delete(out, "stringData")
	out["data"] = data
	return out
}
