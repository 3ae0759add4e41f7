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
}

func (sf *streamFiles) sync() error {
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
		// Opened each time rather than kept: the server may rewrite a
		// block into a new file (compaction), and an fsync of the old
		// one would sync nothing written since.
		if err := syncFile(filepath.Join(sf.dir, e.Name())); err != nil {
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
