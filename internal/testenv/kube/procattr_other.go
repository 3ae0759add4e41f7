//go:build unix && !linux

package kubeenv

import "syscall"

// sysProcAttr puts a child in its own process group, so stopping it stops
// anything it started. Outside Linux there is no parent-death signal: a test
// binary killed before its cleanups leaves its children running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
