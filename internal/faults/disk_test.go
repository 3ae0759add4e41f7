package faults_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/testenv"
)

// diskRow is what the disk-full fault found.
type diskRow struct {
	faultRow
	resumedWithoutRestart bool
	restartRecovered      time.Duration
}

// diskFull runs one jetplane process whose data directory is a small
// file system of its own (a tmpfs, mounted here: it needs root), under
// load, then fills that file system with a file outside jetplane, as
// another program on the same disk would. Applies must then fail with an
// error, none acknowledged may be lost; once the file is removed, the
// service must take changes again (the fault states whether that needed a
// restart) and every object converge.
func diskFull(t *testing.T, bin, dir string) diskRow {
	mnt := filepath.Join(dir, "disk")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("the disk-full fault mounts a small tmpfs and needs root: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	p := &proc{name: "d1", dir: dir, natsName: "d1", data: filepath.Join(mnt, "data"), args: []string{
		"--instance", "d1", "--listen", "127.0.0.1:0",
		"--data", filepath.Join(mnt, "data"), "--sleep", "2ms",
	}}
	natsPort := testenv.FreePort(t)
	p.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	p.args = append(p.args, "--nats-port", fmt.Sprint(natsPort))
	c := &cluster{t: t, bin: bin, dir: dir, procs: []*proc{p}, replicas: 1}
	p.start(t, bin)
	c.waitSpread(time.Minute)

	l := &load{acked: map[string][]int{}, tried: map[string]int{}, failed: map[string][]int{}, firstErr: map[string]int{}}
	l.clients = func() []*api.Client { return []*api.Client{p.client()} }
	l.resume(2)
	time.Sleep(3 * time.Second)
	before := l.ackedCount()

	// Fill what is left of the file system.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			break // ENOSPC: full
		}
	}
	f.Close()
	full := time.Now()
	t.Logf("  file system full at %s", full.UTC().Format("15:04:05.000"))
	time.Sleep(10 * time.Second)
	_, _, failedWhileFull := l.outage(full)
	errsWhileFull := l.errors()
	readyCode, readyBody := readyz(p.client().BaseURL)
	t.Logf("  /readyz while full: %d %s", readyCode, readyBody)
	if readyCode == http.StatusOK {
		t.Errorf("/readyz answered ok while the disk was full")
	}
	if failedWhileFull == 0 {
		t.Errorf("no apply failed while the disk was full")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	row := diskRow{faultRow: faultRow{name: fmt.Sprintf("disk full (tmpfs of 48 MB filled by another file), then freed; /readyz %d while full", readyCode)}}
	if d, ok := recoveryWithin(c, freed, 20*time.Second); ok {
		row.resumedWithoutRestart = true
		row.recovered = d
	} else {
		t.Logf("  no change applied and reconciled within 20 s of freeing space; restarting the process")
		p.signal(t, syscall.SIGTERM)
		restarted := time.Now()
		p.start(t, bin)
		row.restartRecovered = recovery(t, c, restarted)
		row.recovered = time.Since(freed)
	}
	row.spread = c.waitSpread(time.Minute)
	time.Sleep(3 * time.Second)
	l.halt()
	b, e, failed := l.outage(full)
	row.outage, row.failedApplies = e.Sub(b), failed
	v := check(t, c, l, 3*time.Minute)
	row.acked, row.lost, row.unconv, row.overlp, row.converged = l.ackedCount()-before, v.lost, v.unconverged, len(v.overlaps), v.converged
	row.errs = errsWhileFull
	t.Logf("  acked %d, lost %d, unconverged %d; applies failed %d (longest outage %s); resumed without restart: %v; recovered %s after space was freed (restart to recovered: %s)",
		row.acked, row.lost, row.unconv, row.failedApplies, row.outage.Round(time.Millisecond), row.resumedWithoutRestart, row.recovered.Round(time.Millisecond), row.restartRecovered.Round(time.Millisecond))
	t.Logf("  apply errors while full: %s", errsWhileFull)
	if data, err := os.ReadFile(filepath.Join(dir, "d1.log")); err == nil {
		t.Logf("  d1 logged %d lines, %d of them failed status writes", strings.Count(string(data), "\n"), strings.Count(string(data), "status write failed"))
	}
	return row
}

// readyz asks an instance's /readyz.
func readyz(base string) (int, string) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
