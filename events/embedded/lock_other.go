//go:build !unix

package embedded

import "os"

// lockDir does nothing where flock is not available.
func lockDir(string) (func(), error) { return func() {}, nil }

// inode is 0 where the platform does not say: directory listings are
// never kept (streamFiles.blocks).
func inode(fi os.FileInfo) uint64 { return 0 }
