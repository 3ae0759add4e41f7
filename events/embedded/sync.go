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
		sf = &streamFiles{dir: dirs[0], fsync: (*os.File).Sync}
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
	return sf.sync(every)
}

// streamFiles is one stream's block directory and the newest block of
// the last sync.
type streamFiles struct {
	dir string
	// last is the index of the newest block at the last sync: blocks
	// from it on may hold acknowledged writes not yet synced; those
	// before it are complete and were synced.
	last int
	// kept is block last, held open between syncs (not on Windows,
	// where an open file cannot be renamed over); keptInfo is its
	// identity, dirMod the directory's modification time read before
	// the scan that found it.
	kept     *os.File
	keptInfo os.FileInfo
	dirMod   time.Time
	// fsync is (*os.File).Sync; tests replace it to see what is synced.
	fsync func(*os.File) error
}

// sync fsyncs the blocks that may hold writes acknowledged since the
// last sync, every block with every. While nothing but block last has
// changed — the directory's modification time is as it was, block
// last+1 does not exist, and block last is the file kept open — that is
// one fsync of the kept file: no listing of the directory and no open.
func (sf *streamFiles) sync(every bool) error {
	if !every && sf.kept != nil && sf.unchanged() {
		if err := sf.fsync(sf.kept); err != nil {
			return fmt.Errorf("sync stream: %w", err)
		}
		return nil
	}
	if every {
		sf.last = 0
	}
	return sf.scan()
}

// unchanged reports whether the block directory is as the last scan
// left it but for writes to block last. Blocks are numbered in the order
// the server adds them, so a block added since would be last+1: its
// absence is checked as well as the directory's time, which the kernel
// keeps at a coarse tick. A block rewritten into a new file (compaction)
// is a different file under the same name.
func (sf *streamFiles) unchanged() bool {
	di, err := os.Stat(sf.dir)
	if err != nil || !di.ModTime().Equal(sf.dirMod) {
		return false
	}
	if _, err := os.Lstat(filepath.Join(sf.dir, strconv.Itoa(sf.last+1)+".blk")); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(filepath.Join(sf.dir, strconv.Itoa(sf.last)+".blk"))
	return err == nil && os.SameFile(fi, sf.keptInfo)
}

// scan lists the block directory and fsyncs every block from last on,
// keeping the newest open for the next sync.
func (sf *streamFiles) scan() error {
	sf.close()
	began := time.Now()
	di, err := os.Stat(sf.dir)
	if err != nil {
		return fmt.Errorf("sync stream: %w", err)
	}
	ents, err := os.ReadDir(sf.dir)
	if err != nil {
		return fmt.Errorf("sync stream: %w", err)
	}
	newest := sf.last
	found, newBlock := false, false
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil || i < sf.last {
			continue
		}
		found = true
		// Opened at each scan: the server may have rewritten a block
		// into a new file (compaction), and an fsync of the old one
		// would sync nothing written since.
		f, err := os.OpenFile(filepath.Join(sf.dir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("sync stream: %w", err)
		}
		if err := sf.fsync(f); err != nil {
			f.Close()
			return fmt.Errorf("sync stream: %w", err)
		}
		if i > sf.last || sf.last == 0 {
			// A new block: its key (an encrypted store writes one beside
			// it) must last too.
			if err := syncFile(filepath.Join(sf.dir, n+".key")); err != nil && !errors.Is(err, os.ErrNotExist) {
				f.Close()
				return fmt.Errorf("sync stream: %w", err)
			}
			newBlock = true
		}
		if i >= newest && runtime.GOOS != "windows" {
			if fi, err := f.Stat(); err == nil {
				sf.close()
				sf.kept, sf.keptInfo = f, fi
				f = nil
			}
		}
		if f != nil {
			f.Close()
		}
		newest = max(newest, i)
	}
	// A new block's name in the directory must last too: once, after them all.
	if newBlock && runtime.GOOS != "windows" {
		if err := syncFile(sf.dir); err != nil {
			sf.close()
			return fmt.Errorf("sync stream: %w", err)
		}
	}
	if !found && sf.last > 0 {
		return fmt.Errorf("sync stream: no block from %d.blk on in %s", sf.last, sf.dir)
	}
	sf.last = newest
	// The directory's time moves at a coarse tick on some filesystems
	// (a second): a change made in the same tick as the listing would
	// leave it as it was. A time that recent is not kept, so the next
	// round lists again; block numbers may skip (the server skips one
	// when it empties its last block), and last+1's absence alone would
	// not see such a block.
	sf.dirMod = time.Time{}
	if began.Sub(di.ModTime()) >= time.Second {
		sf.dirMod = di.ModTime()
	}
	return nil
}

// close lets go of the kept block, if any.
func (sf *streamFiles) close() {
	if sf.kept != nil {
		sf.kept.Close()
		sf.kept, sf.keptInfo = nil, nil
	}
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

// closeSynced lets go of the blocks SyncStream keeps open.
func (s *syncState) closeSynced() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for _, sf := range s.synced {
		sf.close()
	}
}
