package render

import (
	"bufio"
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

// childAttr kills the child with its parent.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitSelf caps the child's writable memory at what it uses now plus
// memory (the Go runtime fails "out of memory" past it) and its CPU time
// at cpu seconds (SIGXCPU).
func limitSelf(memory int64, cpu int) error {
	data, err := vmData()
	if err != nil {
		return err
	}
	lim := uint64(data + memory)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		return fmt.Errorf("RLIMIT_DATA: %w", err)
	}
	c := uint64(cpu)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: c, Max: c + 1}); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}

// vmData is the process's writable private memory in bytes, as
// RLIMIT_DATA counts it.
func vmData() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if f := bytes.Fields(s.Bytes()); len(f) >= 2 && string(f[0]) == "VmData:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status has no VmData")
}

func cpuExceeded(e *exec.ExitError) bool {
	ws, ok := e.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL)
}
