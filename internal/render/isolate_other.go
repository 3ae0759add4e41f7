//go:build !linux

package render

import (
	"os"
	"os/exec"
	"syscall"
)

func executable() (string, error) { return os.Executable() }

func childAttr() *syscall.SysProcAttr { return nil }

// limitSelf has only the Go memory limit and the watchdog outside Linux.
func limitSelf(memory int64, cpu int) error { return nil }

func cpuExceeded(e *exec.ExitError) bool { return false }
