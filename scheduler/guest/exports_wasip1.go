//go:build wasip1

package guest

import (
	"unsafe"
)

// The host writes the call's context here before each call (decision
// 0018): the cycle number, the node's slot, the node's revision; in a
// batch call the guest writes the entry it is at into the fourth word, so
// that the host's currentNodeName, node and result.status_reason answer
// for that entry.
var area [4]uint64

//go:wasmexport jetplane_area
func jetplaneArea() uint32 { return uint32(uintptr(unsafe.Pointer(&area))) }

// The SDK imports only functions of upstream's host ABI (decision 0055),
// so that its modules load under either host.

//go:wasmimport k8s.io/scheduler currentPod
func hostPod(ptr, limit uint32) uint32

//go:wasmimport k8s.io/scheduler currentNodeName
func hostNodeName(ptr, limit uint32) uint32

//go:wasmimport k8s.io/api node
func hostNodeByName(name, nameLen, ptr, limit uint32) uint32

//go:wasmimport k8s.io/scheduler result.status_reason
func hostStatusReason(ptr, size uint32)

//go:wasmimport k8s.io/scheduler get_config
func hostConfig(ptr, limit uint32) uint32

// jetplane_plugins tells the host which extension points the registered
// plugin implements (1 Filter, 2 Score): the SDK exports both functions
// for every module, and the host must not call what the plugin lacks.
//
//go:wasmexport jetplane_plugins
func jetplanePlugins() uint32 {
	var bits uint32
	if filterPlugin != nil {
		bits |= 1
	}
	if scorePlugin != nil {
		bits |= 2
	}
	return bits
}

var buf = make([]byte, 16<<10)

// fetch calls a (buf, limit) → len host function, growing the buffer when
// the value does not fit.
func fetch(fn func(ptr, limit uint32) uint32) []byte {
	for {
		n := fn(uint32(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf)))
		if int(n) <= len(buf) {
			return buf[:n]
		}
		buf = make([]byte, n)
	}
}

var (
	podCycle uint64 = ^uint64(0)
	pod      *Pod
	// nodes are the decoded nodes by slot (the host numbers nodes densely
	// from 0).
	nodes []cachedNode
)

type cachedNode struct {
	rev  uint64
	node *Node
}

func currentPod() (*Pod, bool) {
	if area[0] != podCycle {
		p, err := DecodePod(fetch(hostPod))
		if err != nil {
			return nil, false
		}
		pod, podCycle = p, area[0]
	}
	return pod, true
}

// nodeAt returns the node in slot at revision rev, decoding what get
// returns when the cached one is older. Slots past a million are not
// cached (a host bug; the guest stays small).
func nodeAt(slot, rev uint64, get func() []byte) (*Node, bool) {
	if slot < uint64(len(nodes)) && nodes[slot].node != nil && nodes[slot].rev == rev {
		return nodes[slot].node, true
	}
	n, err := DecodeNode(get())
	if err != nil {
		return nil, false
	}
	if slot < 1<<20 {
		for uint64(len(nodes)) <= slot {
			nodes = append(nodes, cachedNode{})
		}
		nodes[slot] = cachedNode{rev: rev, node: n}
	}
	return n, true
}

func current() (*Pod, *Node, bool) {
	p, ok := currentPod()
	if !ok {
		return nil, nil, false
	}
	n, ok := nodeAt(area[1], area[2], fetchNode)
	return p, n, ok
}

// hostNode is the current node's protobuf: its name, then the node.
func hostNode(ptr, limit uint32) uint32 {
	name := string(fetch(hostNodeName))
	return hostNodeByName(uint32(uintptr(unsafe.Pointer(unsafe.StringData(name)))), uint32(len(name)), ptr, limit)
}

// ptr is the address of a string's bytes in linear memory (no copy).
func ptr(s string) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))) }

func reason(s string) {
	if s != "" {
		hostStatusReason(ptr(s), uint32(len(s)))
	}
}

//go:wasmexport filter
func filter() uint32 {
	if filterPlugin == nil {
		return uint32(Success)
	}
	p, n, ok := current()
	if !ok {
		reason("guest: cannot decode the pod or node")
		return uint32(Error)
	}
	code, r := filterPlugin.Filter(p, n)
	reason(r)
	return uint32(code)
}

//go:wasmexport score
func score() uint64 {
	if scorePlugin == nil {
		return 0
	}
	p, n, ok := current()
	if !ok {
		reason("guest: cannot decode the pod or node")
		return uint64(Error)
	}
	s, code, r := scorePlugin.Score(p, n)
	reason(r)
	return uint64(s)<<32 | uint64(code)
}

// The batch ABI (decision 0031): the host writes each node's slot and
// revision into an entry, calls jetplane_filter_nodes(n) or
// jetplane_score_nodes(n), and reads each entry's result (a filter's code,
// or score<<32 | code). The guest writes the entry it is at into
// area[3]; a node it has not decoded at that revision comes from
// currentNodeName and node, a reason goes to result.status_reason.

type batchEntry struct {
	slot, rev, result uint64
}

var batch [512]batchEntry

// jetplane_batch_area is the address of the entries, with their count in
// the high 32 bits.
//
//go:wasmexport jetplane_batch_area
func jetplaneBatchArea() uint64 {
	return uint64(uintptr(unsafe.Pointer(&batch))) | uint64(len(batch))<<32
}

// cached returns the node the guest holds in slot at revision rev, nil
// when it holds none: small enough to inline into the batch loops, which
// call nodeAt only on a miss (a call costs more in WebAssembly than the
// rest of a cache hit).
func cached(slot, rev uint64) *Node {
	if slot < uint64(len(nodes)) {
		if c := &nodes[slot]; c.rev == rev {
			return c.node
		}
	}
	return nil
}

// The batch loops below are written out for each extension point, with
// no closure between the loop and the plugin: per node they make one
// call, the plugin's.

//go:wasmexport jetplane_filter_nodes
func filterNodes(n uint32) uint32 {
	if filterPlugin == nil {
		return 1
	}
	p, ok := currentPod()
	if !ok || int(n) > len(batch) {
		return 1
	}
	for i := range batch[:n] {
		e := &batch[i]
		area[3] = uint64(i)
		node := cached(e.slot, e.rev)
		if node == nil {
			if node, ok = nodeAt(e.slot, e.rev, fetchNode); !ok {
				area[3] = 0
				return 1
			}
		}
		code, r := filterPlugin.Filter(p, node)
		e.result = uint64(code)
		if r != "" {
			reason(r)
		}
	}
	area[3] = 0
	return 0
}

//go:wasmexport jetplane_score_nodes
func scoreNodes(n uint32) uint32 {
	if scorePlugin == nil {
		return 1
	}
	p, ok := currentPod()
	if !ok || int(n) > len(batch) {
		return 1
	}
	for i := range batch[:n] {
		e := &batch[i]
		area[3] = uint64(i)
		node := cached(e.slot, e.rev)
		if node == nil {
			if node, ok = nodeAt(e.slot, e.rev, fetchNode); !ok {
				area[3] = 0
				return 1
			}
		}
		s, code, r := scorePlugin.Score(p, node)
		e.result = uint64(s)<<32 | uint64(code)
		if r != "" {
			reason(r)
		}
	}
	area[3] = 0
	return 0
}

// fetchNode is the current node's protobuf, read from the host.
func fetchNode() []byte { return fetch(hostNode) }

// Config returns the plugin's args (the guestConfig string of its
// pluginConfig).
func Config() []byte {
	return append([]byte(nil), fetch(hostConfig)...)
}
