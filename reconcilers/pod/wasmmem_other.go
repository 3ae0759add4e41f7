//go:build !linux

package pod

import (
	"errors"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryAllocator is wazero's own (the Go heap) where no mapping-backed
// one is built.
func memoryAllocator() experimental.MemoryAllocator { return nil }

type imageAllocator struct{ experimental.MemoryAllocator }

// newImageAllocator is Linux's; elsewhere modules keep their data
// segments (merged).
func newImageAllocator(string, []byte) (*imageAllocator, error) {
	return nil, errors.New("memory images are built on Linux only")
}

func (*imageAllocator) Close() error { return nil }
