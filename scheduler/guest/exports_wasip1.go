//go:build wasip1

package guest

import (
	"unsafe"
)

// The host writes the call's context here before each call (decision
// 0018): the cycle number, the node's slot, the node's revision.
var area [3]uint64

//go:wasmexport jetplane_area
func jetplaneArea() uint32 { return uint32(uintptr(unsafe.Pointer(&area))) }

//go:wasmimport k8s.io/api pod
func hostPod(ptr, limit uint32) uint32

//go:wasmimport k8s.io/api nodeInfo/node
func hostNode(ptr, limit uint32) uint32

//go:wasmimport k8s.io/scheduler status_reason
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
	nodes    = map[uint64]cachedNode{}
)

type cachedNode struct {
	rev  uint64
	node *Node
}

func current() (*Pod, *Node, bool) {
	if area[0] != podCycle {
		p, err := DecodePod(fetch(hostPod))
		if err != nil {
			return nil, nil, false
		}
		pod, podCycle = p, area[0]
	}
	c, ok := nodes[area[1]]
	if !ok || c.rev != area[2] {
		n, err := DecodeNode(fetch(hostNode))
		if err != nil {
			return nil, nil, false
		}
		c = cachedNode{rev: area[2], node: n}
		nodes[area[1]] = c
	}
	return pod, c.node, true
}

func reason(s string) {
	if s == "" {
		return
	}
	b := []byte(s)
	hostStatusReason(uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
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

// Config returns the plugin's args (the guestConfig string of its
// pluginConfig).
func Config() []byte {
	return append([]byte(nil), fetch(hostConfig)...)
}
