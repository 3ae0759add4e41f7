package pod

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A volume's quota counts bytes written and entries made, refuses what
// passes it, and gives back what is removed once it is closed.
func TestVolumeQuota(t *testing.T) {
	dir := t.TempDir()
	pod := newQuota(1<<20, 0, nil)
	v, err := newVolumeFS(dir, false, newQuota(16<<10, 0, pod))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	f, errno := v.OpenFile("a", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := f.Write(make([]byte, 8<<10)); errno != 0 {
		t.Fatalf("a write within the quota: %v", errno)
	}
	if _, errno := f.Write(make([]byte, 8<<10)); errno != experimentalsys.EIO {
		t.Fatalf("a write past the quota: %v, want EIO", errno)
	}
	if _, errno := f.Pwrite([]byte{1}, 1<<40); errno != experimentalsys.EIO {
		t.Fatalf("a sparse write a TiB out: %v, want EIO", errno)
	}
	if errno := f.Truncate(1 << 30); errno != experimentalsys.EIO {
		t.Fatalf("a truncate up to 1 GiB: %v, want EIO", errno)
	}
	// Removed while open: still charged.
	if errno := v.Unlink("a"); errno != 0 {
		t.Fatal(errno)
	}
	if g, errno := v.OpenFile("b", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644); errno != 0 {
		t.Fatal(errno)
	} else if _, errno := g.Write(make([]byte, 8<<10)); errno != experimentalsys.EIO {
		t.Fatalf("bytes of a removed but open file were given back: %v", errno)
	} else {
		g.Close()
	}
	f.Close()
	if errno := v.Unlink("b"); errno != 0 {
		t.Fatal(errno)
	}
	if pod.used != 0 {
		t.Fatalf("the pod's quota holds %d bytes after everything went", pod.used)
	}
}

// Links and paths out of the root are refused; a read-only volume
// refuses every write.
func TestVolumeRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	v, err := newVolumeFS(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for name, errno := range map[string]experimentalsys.Errno{
		"symlink":        v.Symlink("/", "s"),
		"link":           v.Link("f", "h"),
		"rename out":     v.Rename("f", "../f"),
		"rename via out": v.Rename("f", "out/tmp/f"),
		"mkdir via out":  v.Mkdir("out/tmp/d", 0o755),
	} {
		if errno == 0 {
			t.Errorf("%s: allowed", name)
		}
	}
	if _, errno := v.OpenFile("out/etc/passwd", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EPERM {
		t.Errorf("open through a link out: %v, want EPERM", errno)
	}
	ro, err := newVolumeFS(dir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, errno := range map[string]experimentalsys.Errno{
		"mkdir":   ro.Mkdir("d", 0o755),
		"unlink":  ro.Unlink("f"),
		"rename":  ro.Rename("f", "g"),
		"utimens": ro.Utimens("f", 0, 0),
		"chmod":   ro.Chmod("f", 0o777),
	} {
		if errno != experimentalsys.EROFS {
			t.Errorf("read-only %s: %v, want EROFS", name, errno)
		}
	}
	if _, errno := ro.OpenFile("f", experimentalsys.O_RDWR, 0); errno != experimentalsys.EROFS {
		t.Errorf("read-only open for writing: %v, want EROFS", errno)
	}
	f, errno := ro.OpenFile("f", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if _, errno := f.Write([]byte("y")); errno == 0 {
		t.Error("wrote through a read-only open")
	}
}
