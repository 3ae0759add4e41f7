package main

import (
	"os"
	"path/filepath"
)

// writeSecret writes a file that holds a secret (a credential's seed, a
// token): readable by its owner only, whatever mode a file of that name
// had before (os.WriteFile keeps an existing file's mode), and whole or
// not at all — a new file beside it, synced, renamed over it.
func writeSecret(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	// CreateTemp makes the file 0600 already; said again for clarity.
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
