package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/schemas"
)

// PodFromObject converts a jetplane Pod (spec in v1.PodSpec shape, status
// details in v1.PodStatus shape) to a v1.Pod.
func PodFromObject(o *schemas.Object) (*v1.Pod, error) {
	pod := &v1.Pod{ObjectMeta: metaOf(o.GetMetadata())}
	if !podSpecFast(o.GetSpec(), &pod.Spec) {
		pod.Spec = v1.PodSpec{}
		if err := structInto(o.GetSpec(), &pod.Spec); err != nil {
			return nil, fmt.Errorf("pod %s/%s: spec: %w", pod.Namespace, pod.Name, err)
		}
	}
	if err := structInto(o.GetStatus().GetDetails(), &pod.Status); err != nil {
		return nil, fmt.Errorf("pod %s/%s: status: %w", pod.Namespace, pod.Name, err)
	}
	return pod, nil
}

// nodeSpec is a Node's spec as jetplane accepts it: v1.NodeSpec, and, for
// nodes without an agent (fixtures, tests), capacity and allocatable or a
// whole status beside it.
type nodeSpec struct {
	v1.NodeSpec `json:",inline"`
	Capacity    v1.ResourceList `json:"capacity,omitempty"`
	Allocatable v1.ResourceList `json:"allocatable,omitempty"`
	Status      *v1.NodeStatus  `json:"status,omitempty"`
}

// NodeFromObject converts a jetplane Node to a v1.Node. Its resources come
// from the status details its agent writes (v1.NodeStatus shape), or else
// from the spec. A node whose Ready condition (in status.conditions or the
// details' conditions) is not True carries the not-ready NoSchedule taint,
// as the Kubernetes node lifecycle controller would give it. Every node is
// labelled kubernetes.io/hostname with its name unless it says otherwise.
func NodeFromObject(o *schemas.Object) (*v1.Node, error) {
	node := &v1.Node{ObjectMeta: metaOf(o.GetMetadata())}
	var spec nodeSpec
	if err := structInto(o.GetSpec(), &spec); err != nil {
		return nil, fmt.Errorf("node %s: spec: %w", node.Name, err)
	}
	node.Spec = spec.NodeSpec
	if spec.Status != nil {
		node.Status = *spec.Status
	}
	if spec.Capacity != nil {
		node.Status.Capacity = spec.Capacity
	}
	if spec.Allocatable != nil {
		node.Status.Allocatable = spec.Allocatable
	}
	if d := o.GetStatus().GetDetails(); d != nil && len(d.GetFields()) > 0 {
		var st v1.NodeStatus
		if err := structInto(d, &st); err != nil {
			return nil, fmt.Errorf("node %s: status: %w", node.Name, err)
		}
		if st.Capacity != nil {
			node.Status.Capacity = st.Capacity
		}
		if st.Allocatable != nil {
			node.Status.Allocatable = st.Allocatable
		}
		if st.Conditions != nil {
			node.Status.Conditions = st.Conditions
		}
	}
	if _, ok := node.Labels[v1.LabelHostname]; !ok {
		// node.Labels is the stored object's map (metaOf): the label
		// goes on a copy, or the projection's object would change under
		// its readers.
		labels := make(map[string]string, len(node.Labels)+1)
		maps.Copy(labels, node.Labels)
		labels[v1.LabelHostname] = node.Name
		node.Labels = labels
	}
	if !nodeReady(o, node) {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})
	}
	return node, nil
}

// nodeReady is false when a Ready condition says so. A node with no Ready
// condition at all (no agent yet, a fixture) counts as ready.
func nodeReady(o *schemas.Object, node *v1.Node) bool {
	for _, c := range o.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus() == "True"
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return true
}

func metaOf(m *schemas.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: types.UID(m.GetUid()),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), Generation: m.GetGeneration(),
	}
	if rv := m.GetResourceVersion(); rv != 0 {
		out.ResourceVersion = strconv.FormatUint(rv, 10)
	}
	return out
}

func structInto(s *structpb.Struct, v any) error {
	if s == nil || len(s.GetFields()) == 0 {
		return nil
	}
	data, err := appendStructJSON(make([]byte, 0, 512), s)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// appendStructJSON appends s as JSON, as protojson writes a Struct but
// without its reflection (a pod is converted once per cycle): numbers as
// encoding/json writes a float64, NaN and infinities refused. Key order
// is the map's; json.Unmarshal does not mind.
func appendStructJSON(b []byte, s *structpb.Struct) ([]byte, error) {
	b = append(b, '{')
	first := true
	for k, v := range s.GetFields() {
		if !first {
			b = append(b, ',')
		}
		first = false
		if !utf8.ValidString(k) {
			return nil, errors.New("invalid UTF-8 in a struct's key")
		}
		b = jsonvalue.AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValueJSON(b, v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValueJSON(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("invalid number %v in a struct", n)
		}
		format := byte('f')
		if a := math.Abs(n); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		return strconv.AppendFloat(b, n, format, -1, 64), nil
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return nil, errors.New("invalid UTF-8 in a struct's string")
		}
		return jsonvalue.AppendString(b, k.StringValue), nil
	case *structpb.Value_StructValue:
		return appendStructJSON(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValueJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		return nil, errors.New("a struct value of no kind")
	}
}

// PodSpecStruct encodes a v1.PodSpec as a spec Struct.
func PodSpecStruct(spec *v1.PodSpec) (*structpb.Struct, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	out := &structpb.Struct{}
	if err := out.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return out, nil
}
