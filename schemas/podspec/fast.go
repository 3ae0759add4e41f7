package podspec

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podFast fills ps from spec as strict would (the struct as JSON, then
// sigs.k8s.io/json's strict decoding) for the common shape of a pod:
// containers with a name, an image, a command, args, a working
// directory, a pull policy, env values and resource requests and limits;
// a node name, a restart policy, a scheduler name, a service account, a
// node selector. It reads every value directly, without JSON. ok is
// false, and ps must be dropped, for anything else (another key, a null,
// a value of another kind, a string that is not valid UTF-8, a quantity
// that does not parse or that JSON would escape): strict then decides,
// errors included. So it never accepts what strict refuses and never
// differs from it where it accepts (FuzzPodFastAsStrict).
func podFast(spec *structpb.Struct, ps *corev1.PodSpec) bool {
	for k, v := range spec.GetFields() {
		var ok bool
		switch k {
		case "containers":
			var l []*structpb.Value
			if l, ok = list(v); ok {
				ps.Containers = make([]corev1.Container, len(l))
				for i, cv := range l {
					c, isStruct := cv.GetKind().(*structpb.Value_StructValue)
					if ok = isStruct && containerFast(c.StructValue, &ps.Containers[i]); !ok {
						break
					}
				}
			}
		case "nodeName":
			ps.NodeName, ok = str(v)
		case "restartPolicy":
			var s string
			s, ok = str(v)
			ps.RestartPolicy = corev1.RestartPolicy(s)
		case "schedulerName":
			ps.SchedulerName, ok = str(v)
		case "serviceAccountName":
			ps.ServiceAccountName, ok = str(v)
		case "nodeSelector":
			ps.NodeSelector, ok = strMap(v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// ReadDirectly says a Pod's spec has the shape Pod reads without JSON;
// strict decoding into corev1.PodSpec (and so into a v1 Pod, at spec)
// accepts every such spec.
func ReadDirectly(spec *structpb.Struct) bool {
	var ps corev1.PodSpec
	return podFast(spec, &ps)
}

func containerFast(s *structpb.Struct, c *corev1.Container) bool {
	for k, v := range s.GetFields() {
		var ok bool
		switch k {
		case "name":
			c.Name, ok = str(v)
		case "image":
			c.Image, ok = str(v)
		case "command":
			c.Command, ok = strList(v)
		case "args":
			c.Args, ok = strList(v)
		case "workingDir":
			c.WorkingDir, ok = str(v)
		case "imagePullPolicy":
			var s string
			s, ok = str(v)
			c.ImagePullPolicy = corev1.PullPolicy(s)
		case "env":
			ok = envFast(v, &c.Env)
		case "resources":
			var r *structpb.Struct
			if r, ok = object(v); ok {
				ok = resourcesFast(r, &c.Resources)
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// envFast reads env entries with a name and a value (valueFrom is left
// to strict).
func envFast(v *structpb.Value, env *[]corev1.EnvVar) bool {
	l, ok := list(v)
	if !ok {
		return false
	}
	out := make([]corev1.EnvVar, len(l))
	for i, ev := range l {
		e, ok := object(ev)
		if !ok {
			return false
		}
		for k, v := range e.GetFields() {
			switch k {
			case "name":
				out[i].Name, ok = str(v)
			case "value":
				out[i].Value, ok = str(v)
			default:
				ok = false
			}
			if !ok {
				return false
			}
		}
	}
	*env = out
	return true
}

func resourcesFast(s *structpb.Struct, r *corev1.ResourceRequirements) bool {
	for k, v := range s.GetFields() {
		var list *corev1.ResourceList
		switch k {
		case "limits":
			list = &r.Limits
		case "requests":
			list = &r.Requests
		default:
			return false
		}
		m, ok := object(v)
		if !ok {
			return false
		}
		out := make(corev1.ResourceList, len(m.GetFields()))
		for name, qv := range m.GetFields() {
			q, ok := quantity(qv)
			if !ok || !utf8.ValidString(name) {
				return false
			}
			out[corev1.ResourceName(name)] = q
		}
		*list = out
	}
	return true
}

// quantity reads a quantity written as a string as Quantity.UnmarshalJSON
// does: it parses the JSON text between the quotes, trimmed, so only a
// string JSON writes as it is (printable ASCII, no quote or backslash)
// reads the same here.
func quantity(v *structpb.Value) (resource.Quantity, bool) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return resource.Quantity{}, false
	}
	for i := 0; i < len(s.StringValue); i++ {
		if c := s.StringValue[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return resource.Quantity{}, false
		}
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s.StringValue))
	return q, err == nil
}

// str is v's string, when v is one JSON carries unchanged (valid UTF-8).
func str(v *structpb.Value) (string, bool) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok || !utf8.ValidString(s.StringValue) {
		return "", false
	}
	return s.StringValue, true
}

func list(v *structpb.Value) ([]*structpb.Value, bool) {
	l, ok := v.GetKind().(*structpb.Value_ListValue)
	if !ok {
		return nil, false
	}
	return l.ListValue.GetValues(), true
}

func object(v *structpb.Value) (*structpb.Struct, bool) {
	s, ok := v.GetKind().(*structpb.Value_StructValue)
	if !ok {
		return nil, false
	}
	return s.StructValue, true
}

// strList is a list of strings (never nil, as JSON decodes [] too).
func strList(v *structpb.Value) ([]string, bool) {
	l, ok := list(v)
	if !ok {
		return nil, false
	}
	out := make([]string, len(l))
	for i, e := range l {
		if out[i], ok = str(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// strMap is an object of strings (never nil, as JSON decodes {} too).
func strMap(v *structpb.Value) (map[string]string, bool) {
	m, ok := object(v)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m.GetFields()))
	for k, e := range m.GetFields() {
		s, ok := str(e)
		if !ok || !utf8.ValidString(k) {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}
