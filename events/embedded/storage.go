package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A write to the server's disk that fails (no space left on device, most
// often) breaks JetStream until it is started again: a stream keeps the
// first write error its file store met and refuses every write after it
// (on a single server), or the server shuts JetStream down (in a cluster).
// Neither mends itself when space returns. So the server's log is watched
// for those errors, StoreError reports them (readiness, and the appends'
// errors, say why the log cannot be written), and once a test write to the
// store directory succeeds again JetStream is started again from its files:
// writes resume without a restart of the process.

// storeWatch is the server's logger: it passes every line on (to stderr
// with Config.Logs) and keeps the first storage error since JetStream last
// started.
type storeWatch struct {
	inner server.Logger // nil: the server logs nothing

	mu    sync.Mutex
	cause string
	at    time.Time

	freeAt    time.Time
	freeBytes uint64
	freeOK    bool
}

// storageFailure reports whether a server log line says JetStream can no
// longer write its store.
func storageFailure(line string) bool {
	l := strings.ToLower(line)
	return strings.Contains(l, "critical write error") || strings.Contains(l, "no space left on device") ||
		(strings.Contains(l, "jetstream out of") && strings.Contains(l, "will be disabled"))
}

func (w *storeWatch) note(format string, v []any) {
	line := fmt.Sprintf(format, v...)
	if !storageFailure(line) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cause == "" {
		w.cause, w.at = line, time.Now()
	}
}

func (w *storeWatch) clear() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cause = ""
}

func (w *storeWatch) Noticef(format string, v ...any) {
	if w.inner != nil {
		w.inner.Noticef(format, v...)
	}
}

func (w *storeWatch) Warnf(format string, v ...any) {
	w.note(format, v)
	if w.inner != nil {
		w.inner.Warnf(format, v...)
	}
}

func (w *storeWatch) Fatalf(format string, v ...any) {
	if w.inner != nil {
		w.inner.Fatalf(format, v...)
	}
}

func (w *storeWatch) Errorf(format string, v ...any) {
	w.note(format, v)
	if w.inner != nil {
		w.inner.Errorf(format, v...)
	}
}

func (w *storeWatch) Debugf(format string, v ...any) {
	if w.inner != nil {
		w.inner.Debugf(format, v...)
	}
}

func (w *storeWatch) Tracef(format string, v ...any) {
	if w.inner != nil {
		w.inner.Tracef(format, v...)
	}
}

// ErrStoreBroken is what StoreError wraps: JetStream cannot write its
// store.
var ErrStoreBroken = errors.New("the embedded NATS server cannot write the log's store")

// StoreError reports why the server cannot write the log now (nil when it
// can, as far as it knows): a write to its store failed (the server's own
// words, such as "no space left on device"), or JetStream is stopped. The
// server starts JetStream again by itself once the store's directory takes
// writes again.
func (s *Server) StoreError() error { return s.storeError(false) }

// StoreErrorNow is StoreError looking at the free space afresh (StoreError
// may use a look up to 200 ms old): for explaining a write that failed.
func (s *Server) StoreErrorNow() error { return s.storeError(true) }

func (s *Server) storeError(fresh bool) error {
	s.watch.mu.Lock()
	cause, at := s.watch.cause, s.watch.at
	s.watch.mu.Unlock()
	switch {
	case cause != "":
		return fmt.Errorf("%w since %s: %s; free space in %s (writes resume by themselves once there is room)",
			ErrStoreBroken, at.UTC().Format(time.RFC3339), cause, s.storeDir)
	case !s.ns.JetStreamEnabled():
		return fmt.Errorf("%w: JetStream is stopped", ErrStoreBroken)
	}
	// The server does not log every write that fails for want of space
	// (an atomic batch's staged messages come back "incomplete"): a disk
	// with almost nothing free counts as full.
	if free, ok := s.watch.free(s.storeDir, fresh); ok && free < storeLowSpace {
		return fmt.Errorf("%w: no space left on device (%d bytes free); free space in %s (writes resume by themselves once there is room)",
			ErrStoreBroken, free, s.storeDir)
	}
	return nil
}

// storeLowSpace is the free space below which the store counts as full.
const storeLowSpace = 1 << 20

// free is the free space of dir's file system, looked at no more often
// than every 200 ms unless fresh (readiness asks at every request).
func (w *storeWatch) free(dir string, fresh bool) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if fresh || time.Since(w.freeAt) > 200*time.Millisecond {
		w.freeAt = time.Now()
		w.freeBytes, w.freeOK = freeSpace(dir)
	}
	return w.freeBytes, w.freeOK
}

// storeProbe is how much a test write puts in the store directory before
// JetStream is started again: room for a few of its blocks.
const storeProbe = 4 << 20

// storeMendPoll is how often a broken store is looked at.
const storeMendPoll = time.Second

// mendStore starts JetStream again if its store is broken but takes
// writes again; the server runs it every storeMendPoll.
func (s *Server) mendStore() {
	// A cluster node's JetStream is a member of the cluster's: stopping
	// and starting it under the cluster (a node still catching up after a
	// restart can look stopped) leaves it unable to place consumers. Its
	// store errors are reported; the operator restarts the node.
	if s.clustered || s.StoreError() == nil {
		return
	}
	if err := probeWrite(s.storeDir, storeProbe); err != nil {
		return
	}
	if err := s.RestartJetStream(); err != nil {
		s.watch.Errorf("jetplane: starting JetStream again failed: %v", err)
	}
}

// probeWrite writes n bytes to a file in dir, syncs and removes it.
func probeWrite(dir string, n int) error {
	f, err := os.CreateTemp(dir, ".jetplane-space-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		m := min(n, len(buf))
		if _, err := f.Write(buf[:m]); err != nil {
			return err
		}
		n -= m
	}
	return f.Sync()
}

// RestartJetStream stops JetStream and starts it again from its files, as
// the server does at start (its storage limit computed again from the free
// space). Streams whose store met a write error open afresh; clients'
// requests fail while it restarts, and their consumers continue after.
func (s *Server) RestartJetStream() error {
	s.optsMu.Lock()
	defer s.optsMu.Unlock()
	if s.ns.JetStreamEnabled() {
		if err := s.ns.ShutdownJetStream(); err != nil {
			return fmt.Errorf("embedded nats: stop jetstream: %w", err)
		}
	}
	s.watch.clear()
	o := s.opts
	err := s.ns.EnableJetStream(&server.JetStreamConfig{
		StoreDir: o.StoreDir, SyncInterval: o.SyncInterval, SyncAlways: o.SyncAlways,
		MaxMemory: o.JetStreamMaxMemory, MaxStore: o.JetStreamMaxStore, Strict: !o.NoJetStreamStrict, CompressOK: true,
	})
	if err != nil {
		return fmt.Errorf("embedded nats: start jetstream in %s: %w", filepath.Clean(o.StoreDir), err)
	}
	s.watch.Noticef("jetplane: JetStream started again; the store takes writes")
	return nil
}
