package render

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// executable is the running executable, even if its file was replaced
// since it started.
func executable() (string, error) { return "/proc/self/exe", nil }

// childAttr kills the child with its parent.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// threadSlack is room in RLIMIT_DATA for the stacks of the threads the Go
// runtime may still start (8 MiB of address space each, little of it
// ever touched).
const threadSlack = 64 << 20

// limitSelf caps the child's writable memory, as a backstop to
// watchMemory, at what it maps now plus twice memory and room for thread
// stacks (the Go runtime fails "out of memory" past it), and its CPU time
// at cpu seconds (SIGXCPU).
func limitSelf(memory int64, cpu int) error {
	dropExecutablePages()
	data, err := vmData()
	if err != nil {
		return err
	}
	lim := uint64(data + 2*memory + threadSlack)
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

// dropExecutablePages lets the kernel reclaim the pages of the executable
// the child touched while starting (tens of MiB of a large binary, shared
// with every process running it): they are mapped again from the page
// cache when used, so the child's resident memory is what rendering
// touches. Only read-only mappings are dropped; writable ones hold data.
func dropExecutablePages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for line := range bytes.Lines(maps) {
		f := strings.Fields(string(line))
		if len(f) < 6 || f[5] != exe || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}
