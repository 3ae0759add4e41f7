//go:build unix

package perf

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used: what a
// benchmark costs, which the other processes on a shared machine change
// less than its wall-clock time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
