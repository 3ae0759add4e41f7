//go:build !linux

package pod

import "github.com/tetratelabs/wazero/experimental"

// memoryAllocator is wazero's own (the Go heap) where no mapping-backed
// one is built.
func memoryAllocator() experimental.MemoryAllocator { return nil }
