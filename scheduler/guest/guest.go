// Package guest is the SDK for jetplane scheduler plugins written in
// standard Go and compiled to WebAssembly:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// A plugin registers itself in an init function (a c-shared module runs
// package initialisers, never main) with Register; the SDK provides the
// guest exports of the kube-scheduler-wasm-extension ABI (filter, score)
// and decodes the pod and nodes the host passes as Kubernetes protobuf. It
// decodes the pod once per scheduling cycle and each node once per node
// revision, keeping decoded nodes between calls (decision 0018), and
// exports jetplane's batch calls, so the host judges many nodes per call
// (decision 0031).
//
// The types here carry the fields plugins commonly need, decoded without
// k8s.io/api so that a plugin stays small and quick to compile.
package guest

// Code is a plugin's verdict, numbered as in the Kubernetes scheduling
// framework and the extension's ABI.
type Code uint32

// Codes.
const (
	Success                      Code = 0
	Error                        Code = 1
	Unschedulable                Code = 2
	UnschedulableAndUnresolvable Code = 3
	Skip                         Code = 5
)

// Taint is a node taint.
type Taint struct {
	Key, Value, Effect string
}

// Node is the part of a v1.Node plugins see.
type Node struct {
	Name          string
	Labels        map[string]string
	Unschedulable bool
	Taints        []Taint
}

// Label is one key and value.
type Label struct{ Key, Value string }

// Pod is the part of a v1.Pod plugins see.
type Pod struct {
	Name, Namespace string
	Labels          map[string]string
	NodeSelector    map[string]string
	// NodeSelectorList is NodeSelector as a list, in the order the pod
	// carries it: quicker to walk than the map in WebAssembly.
	NodeSelectorList []Label
	NodeName         string
}

// FilterPlugin says whether a node can run a pod; a non-empty reason
// explains a rejection.
type FilterPlugin interface {
	Filter(pod *Pod, node *Node) (code Code, reason string)
}

// ScorePlugin ranks a node in [0, 100].
type ScorePlugin interface {
	Score(pod *Pod, node *Node) (score int64, code Code, reason string)
}

var (
	filterPlugin FilterPlugin
	scorePlugin  ScorePlugin
)

// Register installs p as the module's plugin; it may implement
// FilterPlugin, ScorePlugin or both. Call it from init.
func Register(p any) {
	if f, ok := p.(FilterPlugin); ok {
		filterPlugin = f
	}
	if s, ok := p.(ScorePlugin); ok {
		scorePlugin = s
	}
}
