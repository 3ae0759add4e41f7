package scheduler

import (
	"slices"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Cache is the scheduler's view of the cluster: every node at its latest
// revision and every pod bound to a node, plus the pods this scheduler has
// assumed (placed, Bound not yet folded into the projection). It turns that
// into Snapshots cheaply: a NodeInfo is rebuilt only for a node whose
// revision or pods changed. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	nodes   map[string]*cachedNode
	pods    map[string]*cachedPod
	assumed map[string]*cachedPod // the assumed subset of pods
	seq     uint64
	// order and pages are the current snapshot's nodes by name; shared
	// marks that a Snapshot holds pages, so they are copied before a
	// change.
	order  map[string]int
	pages  [][]*NodeInfo
	shared bool
	// owned marks the pages copied since the last Snapshot (nil: all of
	// them are this cache's).
	owned []bool
	dirty map[string]bool
	// setChanged means a node came or went: order must be rebuilt.
	setChanged bool
}

type cachedNode struct {
	node *v1.Node
	rev  uint64
	pods map[string]*PodInfo
	// values go with node: every NodeInfo built for it shares them, as
	// they share alloc, its allocatableOf (never modified).
	values *nodeValues
	alloc  Resources
}

type cachedPod struct {
	info    *PodInfo
	node    string
	rev     uint64
	assumed bool
}

// AssumedPod is a pod placed but not yet seen bound in the projection.
type AssumedPod struct {
	Pod  string
	Node string
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{nodes: map[string]*cachedNode{}, pods: map[string]*cachedPod{}, assumed: map[string]*cachedPod{}, order: map[string]int{}, dirty: map[string]bool{}}
}

// SetSequence records the projection sequence the cache reflects.
func (c *Cache) SetSequence(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = max(c.seq, seq)
}

// NodeRevision is the revision the cache holds for node, 0 if none.
func (c *Cache) NodeRevision(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[name]; n != nil {
		return n.rev
	}
	return 0
}

// SetNode adds or updates a node. An older or equal revision is ignored.
func (c *Cache) SetNode(node *v1.Node, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node.Name]
	if n == nil {
		n = &cachedNode{pods: map[string]*PodInfo{}}
		c.nodes[node.Name] = n
		c.setChanged = true
	} else if rev != 0 && rev <= n.rev {
		return
	}
	n.node, n.rev, n.values, n.alloc = node, rev, &nodeValues{}, allocatableOf(node)
	c.dirty[node.Name] = true
}

// RemoveNode removes a node; pods bound to it stay counted and reappear
// if it comes back.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil {
		return
	}
	if len(n.pods) == 0 {
		delete(c.nodes, name)
	} else {
		n.node = nil
	}
	c.setChanged = true
}

// SetPod records pod as the projection has it at rev: bound to
// spec.nodeName, or not counted when unbound or finished. It confirms an
// assumption of the pod.
func (c *Cache) SetPod(pod *v1.Pod, rev uint64) {
	key := pod.Namespace + "/" + pod.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.pods[key]
	if cur != nil && !cur.assumed && rev != 0 && rev <= cur.rev {
		return
	}
	node := pod.Spec.NodeName
	if node == "" {
		if cur != nil && cur.assumed {
			// The Bound event is not folded yet: keep the assumption.
			return
		}
		c.removePod(key)
		return
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		c.removePod(key)
		return
	}
	c.removePod(key)
	c.addPod(key, &cachedPod{info: NewPodInfo(pod), node: node, rev: rev})
}

// ConfirmAssumed confirms pod key, assumed on node, now that the
// projection shows it bound there at rev. The pod keeps the PodInfo it
// was assumed with (its Bound event sets the node and nothing else the
// plugins read), so its node's info need not be rebuilt, nor the object
// converted. It reports false, changing nothing, unless key is assumed
// on node; the caller then converts the object for SetPod.
func (c *Cache) ConfirmAssumed(key, node string, rev uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pods[key]
	if p == nil || !p.assumed || node == "" || p.node != node {
		return false
	}
	p.assumed, p.rev = false, rev
	delete(c.assumed, key)
	return true
}

// RemovePod forgets a pod that left the projection.
func (c *Cache) RemovePod(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePod(key)
}

// Assume counts pod on node until the projection shows it bound (SetPod)
// or Forget gives it up.
func (c *Cache) Assume(pod *PodInfo, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePod(pod.Key)
	c.addPod(pod.Key, &cachedPod{info: pod, node: node, assumed: true})
}

// Forget drops an assumption (the Bound append failed).
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pods[key]; p != nil && p.assumed {
		c.removePod(key)
	}
}

// Assumed lists the assumed pods, ordered by pod.
func (c *Cache) Assumed() []AssumedPod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]AssumedPod, 0, len(c.assumed))
	for k, p := range c.assumed {
		out = append(out, AssumedPod{Pod: k, Node: p.node})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

// IsAssumed reports whether key is assumed and not yet confirmed.
func (c *Cache) IsAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pods[key]
	return p != nil && p.assumed
}

func (c *Cache) addPod(key string, p *cachedPod) {
	c.pods[key] = p
	if p.assumed {
		c.assumed[key] = p
	}
	n := c.nodes[p.node]
	if n == nil {
		n = &cachedNode{pods: map[string]*PodInfo{}}
		c.nodes[p.node] = n
	}
	n.pods[key] = p.info
	c.dirty[p.node] = true
}

func (c *Cache) removePod(key string) {
	p := c.pods[key]
	if p == nil {
		return
	}
	delete(c.pods, key)
	delete(c.assumed, key)
	if n := c.nodes[p.node]; n != nil {
		delete(n.pods, key)
		if n.node == nil && len(n.pods) == 0 {
			delete(c.nodes, p.node)
		}
		c.dirty[p.node] = true
	}
}

// Snapshot returns the nodes as they stand, assumed pods counted.
func (c *Cache) Snapshot() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.setChanged {
		names := make([]string, 0, len(c.nodes))
		for name, n := range c.nodes {
			if n.node != nil {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		old := c.order
		c.order = make(map[string]int, len(names))
		infos := make([]*NodeInfo, len(names))
		for i, name := range names {
			c.order[name] = i
			if j, ok := old[name]; ok && !c.dirty[name] {
				infos[i] = c.pages[j/snapshotPage][j%snapshotPage]
			} else {
				c.dirty[name] = true
			}
		}
		c.pages, c.owned, c.shared, c.setChanged = paginate(infos), nil, false, false
	}
	if len(c.dirty) > 0 {
		if c.shared {
			// A Snapshot holds the pages: the list is copied, and each
			// page before its first change.
			c.pages = slices.Clone(c.pages)
			c.owned = make([]bool, len(c.pages))
			c.shared = false
		}
		for name := range c.dirty {
			i, ok := c.order[name]
			if !ok {
				continue
			}
			n := c.nodes[name]
			pods := make([]*PodInfo, 0, len(n.pods))
			for _, p := range n.pods {
				pods = append(pods, p)
			}
			ni := newNodeInfo(n.node, n.rev, n.alloc, n.values, pods)
			if pi := i / snapshotPage; c.owned != nil && !c.owned[pi] {
				c.pages[pi] = slices.Clone(c.pages[pi])
				c.owned[pi] = true
			}
			c.pages[i/snapshotPage][i%snapshotPage] = ni
		}
		if len(c.dirty) > 64 {
			// A map keeps the room it once needed, and ranging over
			// it costs that room: the first snapshot's thousands of
			// nodes would be paid again by every cycle's one or two.
			c.dirty = map[string]bool{}
		} else {
			clear(c.dirty)
		}
	}
	c.shared = true
	return &Snapshot{pages: c.pages, n: len(c.order), byName: c.order, Sequence: c.seq}
}
