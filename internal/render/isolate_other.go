//go:build !linux

package render

import (
	"os"
	"os/exec"
)

func executable() (string, error) { return os.Executable() }

// limitSelf has only the Go memory limit and the watchdog outside Linux.
func limitSelf(memory int64, cpu int) error { return nil }

func residentAnon() uint64 { return 0 }

func cpuExceeded(e *exec.ExitError) bool { return false }
