//go:build wasip1

// Command plain is a guest of kube-scheduler-wasm-extension's shape,
// without the SDK and without jetplane's exports: it fetches the node on
// every call and rejects nodes whose name starts with "nope".
package main

import (
	"bytes"
	"unsafe"
)

//go:wasmimport k8s.io/scheduler currentNodeName
func currentNodeName(ptr, limit uint32) uint32

//go:wasmimport k8s.io/api node
func nodeByName(name, nameLen, ptr, limit uint32) uint32

//go:wasmimport k8s.io/scheduler result.status_reason
func statusReason(ptr, size uint32)

var nameBuf [256]byte

// node fetches the current node: its name, then the node by name.
func node(ptr, limit uint32) uint32 {
	n := currentNodeName(uint32(uintptr(unsafe.Pointer(&nameBuf[0]))), uint32(len(nameBuf)))
	return nodeByName(uint32(uintptr(unsafe.Pointer(&nameBuf[0]))), n, ptr, limit)
}

var buf [8192]byte

const why = "node(s) said nope"

//go:wasmexport filter
func filter() uint32 {
	n := node(uint32(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf)))
	if int(n) > len(buf) {
		return 1
	}
	// ObjectMeta (field 1) opens the node; its name (field 1) comes first.
	if bytes.Contains(buf[:n], []byte("\x0a\x06nope-")) {
		statusReason(uint32(uintptr(unsafe.Pointer(unsafe.StringData(why)))), uint32(len(why)))
		return 2
	}
	return 0
}

func main() {}
