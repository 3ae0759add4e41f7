package embedded

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The block directory's listing is kept only while the directory has not
// changed since well before it was taken: a block added afterwards, at
// any time, is found and synced by the next call, as is every block
// again after a full sync is asked for.
func TestStreamFilesFindEveryNewBlock(t *testing.T) {
	dir := t.TempDir()
	sf := &streamFiles{dir: dir}
	block := func(i string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, i+".blk"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sync := func(want int) {
		t.Helper()
		if err := sf.sync(); err != nil {
			t.Fatal(err)
		}
		if sf.last != want {
			t.Fatalf("newest block synced: %d, want %d", sf.last, want)
		}
	}
	block("1")
	sync(1)
	// Just changed: listed again on every call.
	block("2")
	sync(2)
	if sf.listed != nil {
		t.Fatal("a listing taken right after a change was kept")
	}
	// Unchanged for long: the listing is kept, and used.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	sync(2)
	if sf.listed == nil {
		t.Fatal("the listing of a directory unchanged for an hour was not kept")
	}
	sync(2)
	// A block added now changes the directory: found at once.
	block("3")
	sync(3)
	// A full sync (SyncStream's every) walks all blocks from a kept
	// listing too.
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	sync(3)
	sf.last = 0
	sync(3)
	// A block whose file went away is an error, not a silent no-op, and
	// drops the listing.
	if err := os.Remove(filepath.Join(dir, "3.blk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	sf.listed, sf.listedAt = []string{"1.blk", "2.blk", "3.blk"}, old
	if fi, err := os.Stat(dir); err == nil {
		sf.listedAt, sf.listedIno = fi.ModTime(), inode(fi)
	}
	if err := sf.sync(); err == nil {
		t.Fatal("a kept listing naming a block that is gone synced without an error")
	}
	if sf.listed != nil {
		t.Fatal("a listing that named a block that is gone was kept")
	}
}
