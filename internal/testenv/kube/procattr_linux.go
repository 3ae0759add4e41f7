package kubeenv

import "syscall"

// sysProcAttr puts a child in its own process group, so stopping it stops
// anything it started, and has the kernel kill it if this process dies
// without running its cleanups (a test timeout, a SIGKILL).
//
// Pdeathsig fires when the OS thread that started the child exits; Go exits
// threads only for goroutines that end while locked to their thread, which
// nothing in jetplane's tests does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
