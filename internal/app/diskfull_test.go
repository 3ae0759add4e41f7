package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
)

// smallDisk mounts a tmpfs of size at a temporary directory (it needs
// root, which CI has; elsewhere the test is skipped) and returns it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mounting a small file system (CI runs as root): %v: %s", err, out)
		}
		t.Skipf("mounting a small file system needs root: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file at path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}

// When the disk under the embedded server fills, applies fail saying the
// disk is full (not with the server's "atomic publish batch is
// incomplete"), /readyz reports not ready and why, nothing acknowledged
// is lost, and once space is freed the same process takes writes again:
// the server's file store keeps its first write error until JetStream is
// started again, which jetplane does by itself.
func TestDiskFullThenFreed(t *testing.T) {
	disk := smallDisk(t, "32m")
	a, c := startApp(t, app.Config{DataDir: filepath.Join(disk, "data")})
	ctx := context.Background()
	mustApply(t, c, cm("before", "", "v: '1'"))

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	acked := []string{"before"}
	var applyErr error
	for i := 0; i < 200 && applyErr == nil; i++ {
		name := fmt.Sprint("full-", i)
		if _, applyErr = c.Apply(ctx, "full.yaml", []byte(cm(name, "", "v: '"+strings.Repeat("x", 1000)+"'")), ""); applyErr == nil {
			acked = append(acked, name)
		}
	}
	if applyErr == nil {
		t.Fatal("200 applies succeeded on a full disk")
	}
	t.Logf("apply on a full disk: %v", applyErr)
	if msg := applyErr.Error(); !strings.Contains(msg, "no space left on device") || strings.Contains(msg, "batch is incomplete") {
		t.Errorf("apply on a full disk: %v; want it to say the disk is full", applyErr)
	}
	code, body := rawGet(t, a.URL()+"/readyz", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") || !strings.Contains(body, "free space") {
		t.Errorf("/readyz on a full disk: %d %q; want 503 naming the full disk", code, body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	deadline := freed.Add(2 * time.Minute)
	for {
		code, body = rawGet(t, a.URL()+"/readyz", nil)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q two minutes after space was freed", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var err2 error
	for time.Now().Before(deadline) {
		if _, err2 = c.Apply(ctx, "after.yaml", []byte(cm("after", "", "v: '1'")), ""); err2 == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err2 != nil {
		t.Fatalf("apply after space was freed, without a restart: %v", err2)
	}
	t.Logf("writes resumed %s after space was freed", time.Since(freed).Round(time.Millisecond))
	for _, name := range append(acked, "after") {
		if _, err := c.Get(ctx, key(name)); err != nil {
			t.Errorf("get %s after the disk was freed: %v", name, err)
		}
	}
}
