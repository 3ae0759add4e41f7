package scheduler

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is an amount of each resource, in the units kube-scheduler
// counts: millicores, bytes, pods.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
	// Scalar holds extended resources (nvidia.com/gpu, hugepages-2Mi…).
	Scalar map[v1.ResourceName]int64
}

// Add adds r2 to r.
func (r *Resources) Add(r2 Resources) {
	r.MilliCPU += r2.MilliCPU
	r.Memory += r2.Memory
	r.EphemeralStorage += r2.EphemeralStorage
	r.Pods += r2.Pods
	for k, v := range r2.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[k] += v
	}
}

// Sub subtracts r2 from r.
func (r *Resources) Sub(r2 Resources) {
	r.MilliCPU -= r2.MilliCPU
	r.Memory -= r2.Memory
	r.EphemeralStorage -= r2.EphemeralStorage
	r.Pods -= r2.Pods
	for k, v := range r2.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[k] -= v
	}
}

func (r Resources) clone() Resources {
	out := r
	if r.Scalar != nil {
		out.Scalar = make(map[v1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			out.Scalar[k] = v
		}
	}
	return out
}

// ResourcesOf converts a ResourceList.
func ResourcesOf(list v1.ResourceList) Resources {
	var r Resources
	for name, q := range list {
		r.set(name, q)
	}
	return r
}

func (r *Resources) set(name v1.ResourceName, q resource.Quantity) {
	switch name {
	case v1.ResourceCPU:
		r.MilliCPU = q.MilliValue()
	case v1.ResourceMemory:
		r.Memory = q.Value()
	case v1.ResourceEphemeralStorage:
		r.EphemeralStorage = q.Value()
	case v1.ResourcePods:
		r.Pods = q.Value()
	default:
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[name] = q.Value()
	}
}

// max sets each resource of r to the larger of r and r2.
func (r *Resources) max(r2 Resources) {
	r.MilliCPU = max(r.MilliCPU, r2.MilliCPU)
	r.Memory = max(r.Memory, r2.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, r2.EphemeralStorage)
	for k, v := range r2.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[k] = max(r.Scalar[k], v)
	}
}

// Scoring counts a container without requests as this much, as
// kube-scheduler does, so that many best-effort pods do not all land on one
// node.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// PodInfo is a pod as plugins see it, with its requests computed once.
type PodInfo struct {
	Pod *v1.Pod
	// Key is "namespace/name".
	Key string
	// Requests is what the pod takes from a node: the larger of its
	// containers' sum and its largest init container, plus overhead; one pod.
	Requests Resources
	// NonZero is Requests with the scoring defaults for containers that
	// request no cpu or memory.
	NonZero Resources
}

// NewPodInfo computes a pod's requests.
func NewPodInfo(pod *v1.Pod) *PodInfo {
	var req, nz, initMax Resources
	for _, c := range pod.Spec.Containers {
		cr := ResourcesOf(c.Resources.Requests)
		req.Add(cr)
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			cr.MilliCPU = DefaultMilliCPURequest
		}
		if _, ok := c.Resources.Requests[v1.ResourceMemory]; !ok {
			cr.Memory = DefaultMemoryRequest
		}
		nz.MilliCPU += cr.MilliCPU
		nz.Memory += cr.Memory
	}
	for _, c := range pod.Spec.InitContainers {
		initMax.max(ResourcesOf(c.Resources.Requests))
	}
	req.max(initMax)
	nz.MilliCPU = max(nz.MilliCPU, initMax.MilliCPU)
	nz.Memory = max(nz.Memory, initMax.Memory)
	if pod.Spec.Overhead != nil {
		o := ResourcesOf(pod.Spec.Overhead)
		req.Add(o)
		nz.MilliCPU += o.MilliCPU
		nz.Memory += o.Memory
	}
	req.Pods = 1
	nz.Pods = 1
	return &PodInfo{Pod: pod, Key: pod.Namespace + "/" + pod.Name, Requests: req, NonZero: nz}
}

// NodeInfo is a node and the pods counted on it. A NodeInfo in a Snapshot
// is immutable: the cache builds a new one when the node or its pods change.
type NodeInfo struct {
	Node *v1.Node
	// Revision is the node object's resourceVersion (its log sequence).
	Revision uint64
	// Allocatable is what pods may take. Pods is 0 when the node states no
	// pod limit.
	Allocatable Resources
	// Requested sums the requests of the pods on the node, bound or
	// assumed; NonZeroRequested the same with the scoring defaults.
	Requested        Resources
	NonZeroRequested Resources
	// Pods are the pods on the node, ordered by key.
	Pods []*PodInfo
	// Generation changes whenever the NodeInfo does (node revision or
	// pods); plugins that cache per node key on it.
	Generation uint64
	// values are what plugins derived from the node object alone,
	// shared by every NodeInfo of the same node object (see NodeValue).
	values *nodeValues
	// name, unschedulable and taints are Node's, copied when the
	// NodeInfo is built: the built-in plugins read them for every node a
	// cycle looks at, and from here they are in the NodeInfo's memory,
	// which the cycle has already touched, not in the node object's.
	name          string
	unschedulable bool
	taints        []v1.Taint
}

// NodeValueKey names one plugin's value in NodeValue; compared by address.
type NodeValueKey struct{ _ byte }

// NewNodeValueKey returns a key of its own.
func NewNodeValueKey() *NodeValueKey { return &NodeValueKey{} }

type nodeValue struct {
	key *NodeValueKey
	v   any
}

// nodeValues is a small copy-on-write list: a plugin or two per node,
// held in the list's own memory (a lookup follows two pointers, not
// three).
type nodeValues struct{ list atomic.Pointer[nodeValueList] }

type nodeValueList struct {
	n     int
	first [2]nodeValue
	more  []nodeValue
}

func (l *nodeValueList) at(i int) *nodeValue {
	if i < len(l.first) {
		return &l.first[i]
	}
	return &l.more[i-len(l.first)]
}

func (l *nodeValueList) add(e nodeValue) {
	if l.n < len(l.first) {
		l.first[l.n] = e
	} else {
		l.more = append(l.more, e)
	}
	l.n++
}

// NodeValue returns the value stored under key for this node object (nil
// when none): something a plugin derived from the node alone (an
// encoding, say), which the NodeInfos the cache rebuilds when only the
// node's pods change keep, and a new revision of the node drops. Reading
// it is a pointer load and a short scan, cheaper than a lookup by name.
func (n *NodeInfo) NodeValue(key *NodeValueKey) any {
	if n.values == nil {
		return nil
	}
	if l := n.values.list.Load(); l != nil {
		for i := range l.n {
			if e := l.at(i); e.key == key {
				return e.v
			}
		}
	}
	return nil
}

// StoreNodeValue stores v under key for this node object; safe for
// concurrent use.
func (n *NodeInfo) StoreNodeValue(key *NodeValueKey, v any) {
	if n.values == nil {
		return
	}
	for {
		old := n.values.list.Load()
		next := &nodeValueList{}
		if old != nil {
			for i := range old.n {
				if e := old.at(i); e.key != key {
					next.add(*e)
				}
			}
		}
		next.add(nodeValue{key, v})
		if n.values.list.CompareAndSwap(old, next) {
			return
		}
	}
}

// Name is the node's name.
func (n *NodeInfo) Name() string { return n.name }

// Unschedulable is the node's spec.unschedulable.
func (n *NodeInfo) Unschedulable() bool { return n.unschedulable }

// Taints are the node's spec.taints; they must not be modified.
func (n *NodeInfo) Taints() []v1.Taint { return n.taints }

// NewNodeInfo builds a NodeInfo for node with pods.
func NewNodeInfo(node *v1.Node, rev uint64, pods ...*PodInfo) *NodeInfo {
	return newNodeInfo(node, rev, allocatableOf(node), &nodeValues{}, pods)
}

// allocatableOf is what pods may take of node: its allocatable resources,
// or its capacity when it states none.
func allocatableOf(node *v1.Node) Resources {
	if len(node.Status.Allocatable) == 0 {
		return ResourcesOf(node.Status.Capacity)
	}
	return ResourcesOf(node.Status.Allocatable)
}

// newNodeInfo is NewNodeInfo with the node's allocatableOf and values
// given: the cache keeps them with the node object, not working them out
// for every NodeInfo it builds when the node's pods change.
func newNodeInfo(node *v1.Node, rev uint64, alloc Resources, values *nodeValues, pods []*PodInfo) *NodeInfo {
	ni := &NodeInfo{Node: node, Revision: rev, Allocatable: alloc, Generation: generation.Add(1), values: values,
		name: node.Name, unschedulable: node.Spec.Unschedulable, taints: node.Spec.Taints}
	for _, p := range pods {
		ni.addPod(p)
	}
	ni.sortPods()
	return ni
}

func (n *NodeInfo) addPod(p *PodInfo) {
	n.Pods = append(n.Pods, p)
	n.Requested.Add(p.Requests)
	n.NonZeroRequested.Add(p.NonZero)
}

func (n *NodeInfo) sortPods() {
	slices.SortFunc(n.Pods, func(a, b *PodInfo) int { return strings.Compare(a.Key, b.Key) })
}

// withPod returns a copy of n with p added.
func (n *NodeInfo) withPod(p *PodInfo) *NodeInfo {
	c := *n
	c.Pods = append(append(make([]*PodInfo, 0, len(n.Pods)+1), n.Pods...), p)
	c.Requested = n.Requested.clone()
	c.NonZeroRequested = n.NonZeroRequested.clone()
	c.Requested.Add(p.Requests)
	c.NonZeroRequested.Add(p.NonZero)
	c.sortPods()
	c.Generation = generation.Add(1)
	return &c
}

var generation atomic.Uint64

// Snapshot is the nodes one cycle sees, in a fixed order (by name), with
// the pods bound or assumed on each. It is immutable.
//
// The nodes are held in pages of snapshotPage: a cycle changes a node or
// two (the pod it assumed), and the next snapshot copies the pages those
// are on, not the whole list (decision 0105).
type Snapshot struct {
	pages  [][]*NodeInfo
	n      int
	byName map[string]int
	// Sequence is the projection sequence the snapshot reflects (assumed
	// pods aside).
	Sequence uint64

	flatOnce sync.Once
	flat     []*NodeInfo
}

// snapshotPage is how many nodes a page of a Snapshot holds.
const snapshotPage = 256

// paginate cuts nodes into pages (sharing its memory).
func paginate(nodes []*NodeInfo) [][]*NodeInfo {
	pages := make([][]*NodeInfo, 0, (len(nodes)+snapshotPage-1)/snapshotPage)
	for lo := 0; lo < len(nodes); lo += snapshotPage {
		hi := min(lo+snapshotPage, len(nodes))
		pages = append(pages, nodes[lo:hi:hi])
	}
	return pages
}

// NewSnapshot orders nodes by name and indexes them.
func NewSnapshot(seq uint64, nodes []*NodeInfo) *Snapshot {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name() < nodes[j].Name() })
	s := &Snapshot{pages: paginate(nodes), n: len(nodes), byName: make(map[string]int, len(nodes)), Sequence: seq}
	for i, n := range nodes {
		s.byName[n.Name()] = i
	}
	return s
}

// Len is the number of nodes.
func (s *Snapshot) Len() int { return s.n }

// At returns the i-th node in name order.
func (s *Snapshot) At(i int) *NodeInfo { return s.pages[i/snapshotPage][i%snapshotPage] }

// Nodes returns every node in name order, in one slice (built on the
// first call when the nodes take more than one page). It must not be
// modified.
func (s *Snapshot) Nodes() []*NodeInfo {
	if len(s.pages) == 1 {
		return s.pages[0]
	}
	s.flatOnce.Do(func() {
		s.flat = make([]*NodeInfo, 0, s.n)
		for _, p := range s.pages {
			s.flat = append(s.flat, p...)
		}
	})
	return s.flat
}

// Get returns the node named name, or nil.
func (s *Snapshot) Get(name string) *NodeInfo {
	if i, ok := s.byName[name]; ok {
		return s.At(i)
	}
	return nil
}

// WithPod returns a snapshot where p is added on node (a copy of the node's
// NodeInfo; the rest is shared).
func (s *Snapshot) WithPod(node string, p *PodInfo) *Snapshot {
	i, ok := s.byName[node]
	if !ok {
		return s
	}
	pages := slices.Clone(s.pages)
	page := slices.Clone(pages[i/snapshotPage])
	page[i%snapshotPage] = page[i%snapshotPage].withPod(p)
	pages[i/snapshotPage] = page
	return &Snapshot{pages: pages, n: s.n, byName: s.byName, Sequence: s.Sequence}
}
