package integrity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/atomicfile"
)

// DigestsFile records the SHA-256 of every snapshot the instance stored.
const DigestsFile = "snapshots"

// Blobs is what Snapshots guards: the projection's snapshot store.
type Blobs interface {
	Put(ctx context.Context, name string, data []byte) error
	Get(ctx context.Context, name string) ([]byte, error)
	List(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, name string) error
}

// Snapshots wraps a snapshot store so that only a snapshot whose bytes
// are those this instance stored is ever used: the digest of each one
// put is kept in the integrity directory, and one that does not match
// (replaced, damaged, or stored by someone else) reads as not found,
// after an error in the log, so the projection is rebuilt from the log
// instead. It is safe for concurrent use.
type Snapshots struct {
	inner  Blobs
	path   string
	logger *slog.Logger

	mu      sync.Mutex
	digests map[string]string
}

var _ Blobs = (*Snapshots)(nil)

// NewSnapshots guards inner with the digests kept in dir.
func NewSnapshots(inner Blobs, dir string, logger *slog.Logger) (*Snapshots, error) {
	s := &Snapshots{inner: inner, path: filepath.Join(dir, DigestsFile), logger: logger, digests: map[string]string{}}
	b, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("integrity: %w", err)
	}
	if err == nil {
		if err := json.Unmarshal(b, &s.digests); err != nil {
			return nil, fmt.Errorf("integrity: %s: %w", s.path, err)
		}
	}
	return s, nil
}

func digest(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func (s *Snapshots) save() error {
	b, _ := json.MarshalIndent(s.digests, "", " ")
	return atomicfile.Write(s.path, b, 0o600)
}

// Put stores the snapshot and records its digest.
func (s *Snapshots) Put(ctx context.Context, name string, data []byte) error {
	if err := s.inner.Put(ctx, name, data); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.digests[name] = digest(data)
	return s.save()
}

// Get returns the snapshot only when its bytes are the ones stored.
func (s *Snapshots) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := s.inner.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	want, ok := s.digests[name]
	s.mu.Unlock()
	if got := digest(b); !ok || got != want {
		reason := "this instance never stored it"
		if ok {
			reason = fmt.Sprintf("its bytes changed (sha256 %s, stored %s)", got, want)
		}
		s.logger.Error("a snapshot is not used: the projection is rebuilt from the log", "snapshot", name, "reason", reason)
		return nil, fmt.Errorf("snapshot %s: %s: %w", name, reason, events.ErrNotFound)
	}
	return b, nil
}

// List lists the snapshots.
func (s *Snapshots) List(ctx context.Context, prefix string) ([]string, error) {
	return s.inner.List(ctx, prefix)
}

// Delete removes a snapshot and its digest.
func (s *Snapshots) Delete(ctx context.Context, name string) error {
	if err := s.inner.Delete(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.digests, name)
	return s.save()
}

// Missing names the snapshots this instance stored that the store no
// longer holds (nothing is lost: the projection is rebuilt from the log),
// after logging each.
func (s *Snapshots) Missing(ctx context.Context) ([]string, error) {
	names, err := s.inner.List(ctx, "")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.digests {
		if !have[n] {
			out = append(out, n)
			s.logger.Error("a snapshot this instance stored is gone: the projection is rebuilt from the log", "snapshot", n)
		}
	}
	return out, nil
}
