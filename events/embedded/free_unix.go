//go:build unix

package embedded

import (
	"os"
	"syscall"
)

// freeSpace is the space left on dir's file system to this process (root
// may use the blocks reserved for it).
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	if os.Geteuid() == 0 {
		return uint64(st.Bfree) * uint64(st.Bsize), true
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
