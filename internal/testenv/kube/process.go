//go:build unix

package kubeenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child (etcd or kube-apiserver) whose output goes to a log
// file. Not safe for concurrent use, except exited, which is.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the child has exited and been reaped
	err  error         // how it exited; read only after done is closed
}

// startProcess starts bin in its own process group, appending its output to
// logPath. The child's environment holds only PATH and TMPDIR, so that a
// developer's ETCD_* or KUBECONFIG cannot change it.
func startProcess(name, bin string, args []string, dir, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the child has exited, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the child's process group, then SIGKILL if it has
// not exited within grace, and returns once the child is reaped.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last n lines of the child's log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return tail(b, n)
}

// portTaken reports whether the child died because a port it was given was
// bound by someone else between our probe and its listen.
func (p *process) portTaken() bool {
	b, _ := os.ReadFile(p.log)
	return strings.Contains(string(b), "address already in use")
}

var errExited = errors.New("exited before it was ready")
