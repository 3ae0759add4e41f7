package scheduler

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podSpecFast fills spec from s as structInto would (JSON, then
// encoding/json) for the common shape of a pod a scheduler places:
// containers with a name, an image and resource requests and limits; a
// node name, a scheduler name, a node selector, a restart policy, a
// service account. ok is false, and spec must be dropped, for anything
// else (another key, a value of another kind, a string JSON would escape,
// a quantity that does not parse): structInto then decides, errors
// included. So it never accepts what the JSON path refuses and never
// differs from it where it accepts.
func podSpecFast(s *structpb.Struct, spec *v1.PodSpec) bool {
	for k, v := range s.GetFields() {
		switch k {
		case "containers":
			l, ok := v.GetKind().(*structpb.Value_ListValue)
			if !ok {
				return false
			}
			vals := l.ListValue.GetValues()
			spec.Containers = make([]v1.Container, len(vals))
			for i, cv := range vals {
				c, ok := cv.GetKind().(*structpb.Value_StructValue)
				if !ok || !containerFast(c.StructValue, &spec.Containers[i]) {
					return false
				}
			}
		case "nodeName":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			spec.NodeName = str
		case "schedulerName":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			spec.SchedulerName = str
		case "serviceAccountName":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			spec.ServiceAccountName = str
		case "restartPolicy":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			spec.RestartPolicy = v1.RestartPolicy(str)
		case "nodeSelector":
			m, ok := v.GetKind().(*structpb.Value_StructValue)
			if !ok {
				return false
			}
			sel := make(map[string]string, len(m.StructValue.GetFields()))
			for lk, lv := range m.StructValue.GetFields() {
				str, ok := plainString(lv)
				if !ok || !plain(lk) {
					return false
				}
				sel[lk] = str
			}
			spec.NodeSelector = sel
		default:
			return false
		}
	}
	return true
}

func containerFast(s *structpb.Struct, c *v1.Container) bool {
	for k, v := range s.GetFields() {
		switch k {
		case "name":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			c.Name = str
		case "image":
			str, ok := plainString(v)
			if !ok {
				return false
			}
			c.Image = str
		case "resources":
			r, ok := v.GetKind().(*structpb.Value_StructValue)
			if !ok {
				return false
			}
			for rk, rv := range r.StructValue.GetFields() {
				var list *v1.ResourceList
				switch rk {
				case "requests":
					list = &c.Resources.Requests
				case "limits":
					list = &c.Resources.Limits
				default:
					return false
				}
				if !resourcesFast(rv, list) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// resourcesFast reads a ResourceList whose quantities are strings, as
// Quantity.UnmarshalJSON reads them (the string between the quotes, which
// plain keeps free of escapes, trimmed and parsed).
func resourcesFast(v *structpb.Value, list *v1.ResourceList) bool {
	m, ok := v.GetKind().(*structpb.Value_StructValue)
	if !ok {
		return false
	}
	out := make(v1.ResourceList, len(m.StructValue.GetFields()))
	for name, qv := range m.StructValue.GetFields() {
		str, ok := plainString(qv)
		if !ok || !plain(name) {
			return false
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(str))
		if err != nil {
			return false
		}
		out[v1.ResourceName(name)] = q
	}
	*list = out
	return true
}

// plainString is v's string when it is one that JSON writes as it is.
func plainString(v *structpb.Value) (string, bool) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok || !plain(s.StringValue) {
		return "", false
	}
	return s.StringValue, true
}

// plain: valid UTF-8 with no quote, backslash or control character, which
// the JSON path's round trip leaves as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(s)
}
