package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SyncStream makes durable every message of stream name that the server
// has acknowledged: it fsyncs the stream's newest message blocks (every
// block with every, for a write that may have changed older ones, such
// as an erase), and the block directory (with each new block's key file)
// when a block was added since the last call. It is what a server started without SyncAlways
// does not do per write, and what the log calls once for all the writes
// acknowledged before the call (events.Config.Sync, decision 0083).
//
// It relies on the server's store for a single-replica file stream: a
// message is written to its block file (not buffered) before it is
// acknowledged, and lies in a file "N.blk" of the stream's "msgs"
// directory, N growing. A store laid out otherwise is an error, never a
// silent no-op. Not for a clustered server (its streams' durability is
// the cluster's). Safe for concurrent use; calls are serialized.
func (s *Server) SyncStream(name string, every bool) error {
	if s.clustered {
		return errors.New("sync stream: a clustered server keeps its own durability")
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced == nil {
		s.synced = map[string]*streamFiles{}
	}
	sf := s.synced[name]
	if sf == nil {
		dirs, err := filepath.Glob(filepath.Join(s.storeDir, "jetstream", "*", "streams", name, "msgs"))
		if err != nil || len(dirs) != 1 {
			return fmt.Errorf("sync stream %s: found %d block directories under %s, want one", name, len(dirs), s.storeDir)
		}
		sf = &streamFiles{dir: dirs[0]}
		// Without per-write fsyncs the server writes a new stream's
		// metadata and makes its directories unsynced: make them last
		// before its first write is counted durable.
		stream := filepath.Dir(sf.dir)
		for _, f := range []string{"meta.inf", "meta.sum"} {
			if err := syncFile(filepath.Join(stream, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sync stream: %w", err)
			}
		}
		if runtime.GOOS != "windows" {
			for _, d := range []string{sf.dir, stream, filepath.Dir(stream), filepath.Dir(filepath.Dir(stream))} {
				if err := syncFile(d); err != nil {
					return fmt.Errorf("sync stream: %w", err)
				}
			}
		}
		s.synced[name] = sf
	}
	if every {
		sf.last = 0
	}
	return sf.sync()
}

// streamFiles is one stream's block directory and the newest block of
// the last sync.
type streamFiles struct {
	dir string
	// last is the index of the newest block at the last sync: blocks
	// from it on may hold acknowledged writes not yet synced; those
	// before it are complete and were synced.
	last int
	// listed are the names of the blocks as the directory listed them,
	// when the directory was last modified at listedAt (inode listedIno)
	// and that was well before the listing: while the
	// directory's modification time and inode stay those, no entry was
	// added, removed or renamed since, and the listing is the one it
	// would give again (listing it anew on every call was a sixth of the
	// calls' CPU). nil: list it.
	listed    []string
	listedAt  time.Time
	listedIno uint64
}

// listingMargin is how long before a listing the directory's last
// change must lie for the listing to be kept: far longer than the tick
// of the clock that stamps directories, so that a change made after the
// listing cannot carry the same time stamp.
const listingMargin = time.Second

// blocks lists the names of the stream's blocks, from the kept listing
// when the directory has not changed since it was taken.
func (sf *streamFiles) blocks() ([]string, error) {
	fi, statErr := os.Stat(sf.dir)
	if statErr == nil && sf.listed != nil && fi.ModTime().Equal(sf.listedAt) && inode(fi) == sf.listedIno {
		return sf.listed, nil
	}
	start := time.Now()
	ents, err := os.ReadDir(sf.dir)
	if err != nil {
		sf.listed = nil
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(n); err == nil {
			names = append(names, e.Name())
		}
	}
	sf.listed = nil
	if statErr == nil && inode(fi) != 0 && fi.ModTime().Before(start.Add(-listingMargin)) {
		sf.listed, sf.listedAt, sf.listedIno = names, fi.ModTime(), inode(fi)
	}
	return names, nil
}

func (sf *streamFiles) sync() error {
	names, err := sf.blocks()
	if err != nil {
		return fmt.Errorf("sync stream: %w", err)
	}
	newest := sf.last
	found, newBlock := false, false
	for _, name := range names {
		n, _ := strings.CutSuffix(name, ".blk")
		i, err := strconv.Atoi(n)
		if err != nil || i < sf.last {
			continue
		}
		found = true
		// Opened each time rather than kept: the server may rewrite a
		// block into a new file (compaction), and an fsync of the old
		// one would sync nothing written since.
		if err := syncBlock(filepath.Join(sf.dir, name)); err != nil {
			sf.listed = nil
			return fmt.Errorf("sync stream: %w", err)
		}
		if i > sf.last || sf.last == 0 {
			// A new block: its key (an encrypted store writes one beside
			// it) must last too.
			if err := syncFile(filepath.Join(sf.dir, n+".key")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sync stream: %w", err)
			}
			newBlock = true
		}
		newest = max(newest, i)
	}
	// A new block's name in the directory must last too: once, after them all.
	if newBlock && runtime.GOOS != "windows" {
		if err := syncFile(sf.dir); err != nil {
			return fmt.Errorf("sync stream: %w", err)
		}
	}
	if !found && sf.last > 0 {
		return fmt.Errorf("sync stream: no block from %d.blk on in %s", sf.last, sf.dir)
	}
	sf.last = newest
	return nil
}

// syncBlock fsyncs the block file name (a file: opened for writing, as
// syncFile opens files, without asking first).
func syncBlock(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncFile(name string) error {
	flag := os.O_RDWR
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncState is the Server's part for SyncStream.
type syncState struct {
	syncMu sync.Mutex
	synced map[string]*streamFiles
}
