package integrity

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events/chain"
)

// MonitorConfig configures the running check.
type MonitorConfig struct {
	// StoreDir is the NATS server's store directory; Stream the log's
	// stream.
	StoreDir, Stream string
	Keeper           *Keeper
	Logger           *slog.Logger
	// Tick is how often new events are chained and the log checked for
	// gaps and a shorter end (default 1 s); CheckpointEvery how often a
	// head that moved is signed (default 2 s); FullEvery how often the
	// whole log is verified again (default 10 min).
	Tick, CheckpointEvery, FullEvery time.Duration
	// Fix is what the damage error tells the operator to do.
	Fix string
}

// Monitor chains the events the server stores while it runs, signs
// checkpoints, and reports damage. It is safe for concurrent use.
type Monitor struct {
	cfg MonitorConfig

	mu       sync.Mutex
	w        *chain.Walker
	store    *chain.Store
	damage   error
	report   Report // the damage found (or the last full verify)
	signed   uint64 // sequence of the last checkpoint
	synced   uint32 // block files up to this one were synced
	walkLock sync.Mutex
	// seq and head are the walk's position as readers see it.
	seq  uint64
	head chain.Head
}

// NewMonitor goes on from the check made before the server started
// (initial); a damaged initial report makes the monitor damaged from the
// start: it stays so until the process restarts on a whole log.
func NewMonitor(cfg MonitorConfig, initial Report) *Monitor {
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 2 * time.Second
	}
	if cfg.FullEvery == 0 {
		cfg.FullEvery = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Monitor{cfg: cfg, w: initial.w, report: initial, seq: initial.Last, head: initial.Head}
	if initial.w != nil {
		m.store = initial.w.Store()
	}
	if c, ok := cfg.Keeper.Last(); ok {
		m.signed = c.Seq
	}
	if !initial.OK() {
		m.damage = m.wrap(initial)
	}
	return m
}

func (m *Monitor) wrap(r Report) error {
	return fmt.Errorf("%w; %s", r.Err(), m.cfg.Fix)
}

// Damage is nil while the log is whole, else the error naming the damage
// and the fix; writes must be refused while it is not nil.
func (m *Monitor) Damage() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.damage
}

// Head is the last sequence chained and its head.
func (m *Monitor) Head() (uint64, chain.Head) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq, m.head
}

// Start runs the check until ctx ends.
func (m *Monitor) Start(ctx context.Context) error {
	tick := time.NewTicker(m.cfg.Tick)
	defer tick.Stop()
	lastCP, lastFull := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		m.step(false)
		if time.Since(lastCP) >= m.cfg.CheckpointEvery {
			m.checkpoint()
			lastCP = time.Now()
		}
		if time.Since(lastFull) >= m.cfg.FullEvery {
			m.Full()
			lastFull = time.Now()
		}
	}
}

// Close takes a last step over complete files (the server has stopped)
// and signs the head.
func (m *Monitor) Close() {
	m.step(true)
	m.checkpoint()
}

// step chains what the server stored since the last step; a break it
// sees is confirmed by a full verify before it counts.
func (m *Monitor) step(final bool) {
	m.walkLock.Lock()
	defer m.walkLock.Unlock()
	if m.Damage() != nil {
		return
	}
	if m.store == nil {
		s, err := OpenStore(m.cfg.StoreDir, m.cfg.Stream)
		if err != nil || s == nil {
			return
		}
		m.mu.Lock()
		m.store, m.w = s, chain.NewWalker(s, 1, chain.Head{})
		m.mu.Unlock()
	}
	m.mu.Lock()
	w := m.w
	m.mu.Unlock()
	// The walker is only used under walkLock; m.mu guards the pointer and
	// the head readers see.
	next, head := w.Next, w.Head
	breaks, err := w.Step(final, nil)
	if err != nil {
		m.cfg.Logger.Warn("integrity: reading the log's files failed", "err", err)
		return
	}
	m.mu.Lock()
	m.seq, m.head = w.Next-1, w.Head
	m.mu.Unlock()
	if len(breaks) == 0 {
		return
	}
	// Confirm against a full walk, held to what this instance saw.
	live := &Checkpoint{Stream: m.cfg.Stream, Seq: next - 1, Head: head.String(), Time: time.Now()}
	if next <= 1 {
		live = nil
	}
	m.fullLocked(live, !final)
}

// Full verifies the whole log again, held to the checkpoints and to the
// head chained so far.
func (m *Monitor) Full() Report {
	m.walkLock.Lock()
	defer m.walkLock.Unlock()
	seq, head := m.Head()
	var live *Checkpoint
	if seq > 0 {
		live = &Checkpoint{Stream: m.cfg.Stream, Seq: seq, Head: head.String(), Time: time.Now()}
	}
	return m.fullLocked(live, true)
}

func (m *Monitor) fullLocked(live *Checkpoint, running bool) Report {
	if m.Damage() != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.report
	}
	store, err := OpenStore(m.cfg.StoreDir, m.cfg.Stream)
	if err != nil {
		m.cfg.Logger.Warn("integrity: reading the log's files failed", "err", err)
		return Report{}
	}
	r, err := Verify(store, m.cfg.Stream, m.cfg.Keeper.All(), VerifyOptions{Live: live, Running: running})
	if err != nil {
		m.cfg.Logger.Warn("integrity: verifying the log failed", "err", err)
		return r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.report = r
	if !r.OK() {
		m.damage = m.wrap(r)
		LogReport(m.cfg.Logger, r, m.cfg.Fix)
		return r
	}
	if r.w != nil {
		m.store, m.w, m.seq, m.head = store, r.w, r.Last, r.Head
	}
	return r
}

// checkpoint signs the head when it moved, after syncing the block files
// it covers: a checkpoint never names events a machine crash could take.
func (m *Monitor) checkpoint() {
	m.walkLock.Lock()
	defer m.walkLock.Unlock()
	if m.Damage() != nil || m.w == nil || m.w.Broken() {
		return
	}
	seq, head := m.w.Next-1, m.w.Head
	if seq <= m.signed {
		return
	}
	cur := m.w.Block()
	for i := max(m.synced, 1); i <= cur; i++ {
		if f, err := os.Open(filepath.Join(m.store.Dir, fmt.Sprintf("%d.blk", i))); err == nil {
			_ = f.Sync()
			f.Close()
		}
	}
	m.synced = cur
	if _, err := m.cfg.Keeper.Add(seq, head, time.Now(), cur); err != nil {
		m.cfg.Logger.Warn("integrity: checkpoint not written", "err", err)
		return
	}
	m.signed = seq
}

// Report is the last full verify's report (or the damage found).
func (m *Monitor) Report() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.report
}

// LogReport logs every break of r with where it is and what to do.
func LogReport(l *slog.Logger, r Report, fix string) {
	for _, b := range r.Breaks {
		l.Error("the log is damaged", "stream", r.Stream, "kind", string(b.Kind), "first_seq", b.First, "last_seq", b.Last,
			"file", b.File, "offset", b.Offset, "detail", b.Detail, "fix", fix)
	}
}
