package render

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// executable is the running executable, even if its file was replaced
// since it started.
func executable() (string, error) { return "/proc/self/exe", nil }

// threadSlack is room in RLIMIT_DATA for the stacks of the threads a
// binary linked with the C library may still start (8 MiB of address
// space each, little of it ever touched).
const threadSlack = 32 << 20

// limitSelf caps the child's CPU time at cpu seconds (SIGXCPU, then
// SIGKILL) and its writable memory, a backstop to watchMemory for one
// allocation larger than the limit, at what it maps now plus
// dataPercent of memory and room for thread stacks: past it the Go
// runtime fails "out of memory". RLIMIT_DATA counts only writable private
// mappings, so the address space the Go runtime and the race detector
// reserve without using does not count against it.
func limitSelf(memory int64, cpu int) error {
	data, err := statusBytes("VmData:")
	if err != nil {
		return err
	}
	lim := uint64(data + memory*dataPercent/100 + threadSlack)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		return fmt.Errorf("RLIMIT_DATA: %w", err)
	}
	c := uint64(cpu)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: c, Max: c + 1}); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}

// residentAnon is the process's resident anonymous memory in bytes (0 if
// unknown): what it holds that no file backs.
func residentAnon() uint64 {
	n, _ := statusBytes("RssAnon:")
	return uint64(n)
}

// statusBytes reads a "Name: N kB" line of /proc/self/status.
func statusBytes(name string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == name {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status has no %s", name)
}

func cpuExceeded(e *exec.ExitError) bool {
	ws, ok := e.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL)
}
