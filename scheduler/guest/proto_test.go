package guest

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecodeNodeAndPod(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "disk": "ssd"}},
		Spec: v1.NodeSpec{Unschedulable: true, Taints: []v1.Taint{{Key: "gpu", Value: "yes", Effect: v1.TaintEffectNoSchedule}}}}
	data, err := node.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeNode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := &Node{Name: "n1", Labels: node.Labels, Unschedulable: true, Taints: []Taint{{Key: "gpu", Value: "yes", Effect: "NoSchedule"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("node %+v, want %+v", got, want)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}, NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}}}
	if data, err = pod.Marshal(); err != nil {
		t.Fatal(err)
	}
	gp, err := DecodePod(data)
	if err != nil {
		t.Fatal(err)
	}
	wantPod := &Pod{Name: "p", Namespace: "ns", Labels: pod.Labels, NodeSelector: pod.Spec.NodeSelector,
		NodeSelectorList: []Label{{"zone", "a"}}, NodeName: "n1"}
	if !reflect.DeepEqual(gp, wantPod) {
		t.Fatalf("pod %+v, want %+v", gp, wantPod)
	}
}

// FuzzDecode: whatever bytes a host (or a broken one) hands over, decoding
// returns an error or a value, never panics.
func FuzzDecode(f *testing.F) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}}}
	nb, _ := node.Marshal()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}}, Spec: v1.PodSpec{NodeSelector: map[string]string{"x": "y"}}}
	pb, _ := pod.Marshal()
	f.Add(nb)
	f.Add(pb)
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeNode(b)
		_, _ = DecodePod(b)
	})
}
