package embedded

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// A block directory laid out as the server lays it out, and a
// streamFiles over it that records what each sync fsyncs (by the file's
// identity, so a file replaced under the same name counts as another).
type syncedFiles struct {
	t      *testing.T
	dir    string
	sf     *streamFiles
	synced []os.FileInfo
}

func newSyncedFiles(t *testing.T) *syncedFiles {
	t.Helper()
	s := &syncedFiles{t: t, dir: t.TempDir()}
	s.sf = &streamFiles{dir: s.dir, fsync: func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		s.synced = append(s.synced, fi)
		return f.Sync()
	}}
	t.Cleanup(s.sf.close)
	return s
}

// write appends to a block, creating it if needed.
func (s *syncedFiles) write(name string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("message\n"); err != nil {
		s.t.Fatal(err)
	}
}

// rewrite replaces a block by a new file, as the server's compaction does.
func (s *syncedFiles) rewrite(name string) {
	s.t.Helper()
	tmp := filepath.Join(s.dir, name+".tmp")
	if err := os.WriteFile(tmp, []byte("compacted\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		s.t.Fatal(err)
	}
}

// sync runs one sync and checks that it fsynced exactly the current
// files of want.
func (s *syncedFiles) sync(every bool, want ...string) {
	s.t.Helper()
	s.synced = nil
	if err := s.sf.sync(every); err != nil {
		s.t.Fatal(err)
	}
	var got []string
	for _, fi := range s.synced {
		cur, err := os.Stat(filepath.Join(s.dir, fi.Name()))
		if err != nil || !os.SameFile(fi, cur) {
			s.t.Fatalf("synced %s, which is no longer the file of that name", fi.Name())
		}
		got = append(got, fi.Name())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		s.t.Fatalf("synced %q, want %q", got, want)
	}
}

// Between two syncs the newest block is fsynced through the file kept
// open; a new block, a block rewritten into a new file, an erase (every)
// and files added beside the blocks each make the next sync list the
// directory again, and the files it fsyncs are always the current ones.
func TestStreamFilesSyncsTheCurrentBlocks(t *testing.T) {
	s := newSyncedFiles(t)
	s.write("1.blk")
	s.sync(false, "1.blk")
	s.write("1.blk")
	s.sync(false, "1.blk")
	if runtime.GOOS != "windows" && s.sf.kept == nil {
		t.Fatal("no block kept open after a scan")
	}

	// A new block while the directory's time may not have moved: found
	// by its number.
	s.write("1.blk")
	s.write("2.blk")
	s.sync(false, "1.blk", "2.blk")
	s.write("2.blk")
	s.sync(false, "2.blk")

	// Two blocks added between syncs, numbered past 9 (names do not
	// sort as numbers).
	for _, b := range []string{"3.blk", "4.blk", "5.blk", "6.blk", "7.blk", "8.blk", "9.blk", "10.blk"} {
		s.write(b)
	}
	s.sync(false, "2.blk", "3.blk", "4.blk", "5.blk", "6.blk", "7.blk", "8.blk", "9.blk", "10.blk")
	s.write("10.blk")
	s.sync(false, "10.blk")

	// The newest block rewritten into a new file: the kept one is stale.
	s.rewrite("10.blk")
	s.sync(false, "10.blk")
	s.write("10.blk")
	s.sync(false, "10.blk")

	// An erase may have changed any block.
	s.sync(true, "1.blk", "2.blk", "3.blk", "4.blk", "5.blk", "6.blk", "7.blk", "8.blk", "9.blk", "10.blk")
	s.sync(false, "10.blk")

	// A file beside the blocks (the server's index) changes nothing
	// that is synced.
	if err := os.WriteFile(filepath.Join(s.dir, "index.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.sync(false, "10.blk")
}

// Blocks gone from the directory are an error, never a silent success.
func TestStreamFilesMissingBlocks(t *testing.T) {
	s := newSyncedFiles(t)
	s.write("1.blk")
	s.write("2.blk")
	s.sync(false, "1.blk", "2.blk")
	for _, b := range []string{"1.blk", "2.blk"} {
		if err := os.Remove(filepath.Join(s.dir, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.sf.sync(false); err == nil {
		t.Fatal("sync of a directory whose blocks are gone succeeded")
	}
}

// A block added in the same tick of the directory's time as the listing
// before it (a filesystem that keeps the time in seconds), with a number
// that skips one (the server skips a number when it empties its last
// block), is still found: a listing that recent is not trusted.
func TestStreamFilesBlockAddedInTheListingsTick(t *testing.T) {
	s := newSyncedFiles(t)
	s.write("1.blk")
	s.sync(false, "1.blk")
	before, err := os.Stat(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.write("3.blk")
	if err := os.Chtimes(s.dir, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	s.sync(false, "1.blk", "3.blk")

	// A directory unchanged for long is trusted: the next round fsyncs
	// the kept block alone, without listing.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(s.dir, old, old); err != nil {
		t.Fatal(err)
	}
	s.sync(false, "3.blk")
	if s.sf.dirMod.IsZero() {
		t.Fatal("the listing of a directory unchanged for an hour was not kept")
	}
	s.write("3.blk")
	s.sync(false, "3.blk")
}
