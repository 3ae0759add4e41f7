package pod

import (
	"context"
	"os"
	"path/filepath"
)

// Precompile fills the compilation cache in dir with module, so that the
// first pod of a test does not wait for the compiler (minutes under the
// race detector on a loaded machine).
func Precompile(ctx context.Context, dir string, module []byte) error {
	h, err := newWasmHost(dir)
	if err != nil {
		return err
	}
	defer h.close(ctx)
	path := filepath.Join(dir, "precompile.wasm")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		return err
	}
	defer os.Remove(path)
	_, _, err = h.compile(ctx, "precompile", path, 0)
	return err
}
