package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// Log is what a projection reads.
type Log interface {
	Read(ctx context.Context, opts events.ReadOptions, fn events.Handler) error
	Scan(ctx context.Context, opts events.ScanOptions, fn func(chunk []events.Message, prepared any) error) error
	LastSequence(ctx context.Context) (uint64, error)
}

// Blobs is where snapshots go.
type Blobs interface {
	Put(ctx context.Context, name string, data []byte) error
	Get(ctx context.Context, name string) ([]byte, error)
	List(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, name string) error
}

var (
	_ Log   = (*events.Log)(nil)
	_ Blobs = (*events.Blobs)(nil)
)

// SnapshotName starts the blob names of snapshots (see snapshots.go).
const SnapshotName = "state"

// ProjectorConfig configures a Projector.
type ProjectorConfig struct {
	Log   Log
	Store *Store
	// Blobs stores snapshots; nil disables them.
	Blobs Blobs
	// SnapshotEvery takes a snapshot after this many events (default 50000)...
	SnapshotEvery uint64
	// ...or this much time with at least one new event (default 5 min).
	SnapshotInterval time.Duration
	// SnapshotsKept is how many snapshots are kept, spread over the log,
	// for queries as of a past point (default 32).
	SnapshotsKept int
	Logger        *slog.Logger
}

func (c *ProjectorConfig) validate() error {
	if c.Log == nil || c.Store == nil {
		return errors.New("projector: log and store are required")
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 50000
	}
	if c.SnapshotsKept <= 0 {
		c.SnapshotsKept = 32
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Projector keeps a Store folded up to the head of the log.
type Projector struct {
	cfg   ProjectorConfig
	ready atomic.Bool
}

// NewProjector validates cfg and returns a projector.
func NewProjector(cfg ProjectorConfig) (*Projector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Projector{cfg: cfg}, nil
}

// Ready reports whether the store has caught up with the log as it was when
// Start began.
func (p *Projector) Ready() bool { return p.ready.Load() }

// Start restores the latest snapshot, folds the log from there and follows
// it until ctx ends, snapshotting as it goes. It blocks; it returns ctx's
// error when ctx ends, or the error that stopped it.
func (p *Projector) Start(ctx context.Context) error {
	cfg := p.cfg
	began := time.Now()
	// Nothing reads the store before it catches up (Ready is false), so the
	// catch-up is a bulk load.
	cfg.Store.BeginBulk()
	defer cfg.Store.EndBulk()
	if err := p.restore(ctx); err != nil {
		return err
	}
	head, err := cfg.Log.LastSequence(ctx)
	if err != nil {
		return err
	}
	from := cfg.Store.Seq()
	cfg.Logger.Info("projection catching up", "from", from+1, "to", head)
	if from >= head {
		p.caughtUp(began, head)
	}
	lastSnap, lastSnapAt := from, time.Now()
	ticker := time.NewTicker(cfg.SnapshotInterval)
	defer ticker.Stop()
	skip := func(m events.Message, err error) {
		cfg.Logger.Warn("skipping undecodable event", "sequence", m.Sequence, "err", err)
	}
	apply := func(ev *schemas.EventRecord) error {
		cfg.Store.Apply(ev)
		if !p.ready.Load() && ev.Sequence >= head {
			p.caughtUp(began, head)
		}
		due := ev.Sequence-lastSnap >= cfg.SnapshotEvery
		select {
		case <-ticker.C:
			due = due || ev.Sequence > lastSnap && time.Since(lastSnapAt) >= cfg.SnapshotInterval
		default:
		}
		if due && p.ready.Load() && cfg.Blobs != nil {
			if err := p.SaveSnapshot(ctx); err != nil {
				// A missed snapshot costs replay time, not correctness.
				cfg.Logger.Warn("snapshot failed", "err", err)
			}
			lastSnap, lastSnapAt = ev.Sequence, time.Now()
		}
		return nil
	}
	// The catch-up is a bounded read: ranges of it are read and decoded in
	// parallel. Then the projector follows the log from the head it saw.
	if from < head {
		if err := scanLog(ctx, cfg.Log, from+1, head, 0, apply, skip); err != nil {
			return err
		}
		from = head
	}
	if !p.ready.Load() {
		p.caughtUp(began, head)
	}
	return foldLog(ctx, cfg.Log, events.ReadOptions{From: from + 1, Follow: true}, apply, skip)
}

func (p *Projector) caughtUp(began time.Time, head uint64) {
	p.cfg.Store.EndBulk()
	p.ready.Store(true)
	p.cfg.Logger.Info("projection caught up", "sequence", head, "objects", p.cfg.Store.Len(), "took", time.Since(began).Round(time.Millisecond))
}

func (p *Projector) restore(ctx context.Context) error {
	if p.cfg.Blobs == nil {
		return nil
	}
	snap, err := LoadSnapshot(ctx, p.cfg.Blobs)
	if errors.Is(err, events.ErrNotFound) {
		return nil
	}
	if err != nil {
		// A damaged snapshot is not fatal: the log holds everything.
		p.cfg.Logger.Warn("snapshot unusable; replaying the whole log", "err", err)
		return nil
	}
	p.cfg.Store.Restore(snap)
	p.cfg.Logger.Info("projection restored from snapshot", "sequence", snap.Sequence, "objects", len(snap.Entries))
	return nil
}

// SaveSnapshot adds the store's current state to the snapshot series.
func (p *Projector) SaveSnapshot(ctx context.Context) error {
	snap := p.cfg.Store.Snapshot()
	snap.Time = nowProto()
	return saveSnapshot(ctx, p.cfg.Blobs, snap, p.cfg.SnapshotsKept)
}

// LoadSnapshot reads the newest snapshot (events.ErrNotFound if none).
func LoadSnapshot(ctx context.Context, b Blobs) (*schemas.Snapshot, error) {
	return loadSnapshotAt(ctx, b, math.MaxUint64)
}

// StateAt rebuilds the state as of log sequence seq: the newest snapshot
// at or before seq, then the log from there up to seq. It reads but never
// changes the live store.
func StateAt(ctx context.Context, log Log, blobs Blobs, seq uint64) (*Store, error) {
	// The rebuilt store answers one query; building indexes for it would
	// cost more than the scan, so it stays a bulk (unindexed) store.
	st := NewStore(StoreOptions{WatchWindow: 1})
	st.BeginBulk()
	if blobs != nil {
		if snap, err := loadSnapshotAt(ctx, blobs, seq); err == nil {
			st.Restore(snap)
		}
	}
	if st.Seq() >= seq {
		return st, nil
	}
	err := scanLog(ctx, log, st.Seq()+1, seq, 0, func(ev *schemas.EventRecord) error {
		st.Apply(ev)
		return nil
	}, func(events.Message, error) {})
	if err != nil {
		return nil, fmt.Errorf("state at %d: %w", seq, err)
	}
	return st, nil
}
