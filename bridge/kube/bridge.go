package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Log is what the bridge writes to: events.Log.
type Log interface {
	// AppendAsync pipelines independent entries; see events.Log.
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
	// LastSequence is the log's head, which the bridge waits for State to
	// reach before it compares the cluster with current state.
	LastSequence(ctx context.Context) (uint64, error)
}

// Reader is what the bridge reads of current state: what it recorded
// earlier, to skip changes already in the log and to find objects deleted
// while no bridge watched. projections.Store implements it.
type Reader interface {
	Keys(q projections.Query) ([]projections.Key, uint64)
	GetRecord(k projections.Key) *schemas.ObjectRecord
	WaitFor(ctx context.Context, seq uint64) error
}

var (
	_ Log    = (*events.Log)(nil)
	_ Reader = (*projections.Store)(nil)
)

// Config configures a Bridge.
type Config struct {
	Clusters Clusters
	Log      Log
	// State is current state, folded from Log.
	State Reader
	// QueueSize bounds each cluster's queue of events waiting to be
	// appended (default 4096). A full queue holds up the informer's event
	// handler, not its watch: client-go buffers notifications for a slow
	// handler.
	QueueSize int
	// MaxBatch is the most events appended in one pipelined round
	// (default 256).
	MaxBatch int
	// DrainTimeout bounds how long a stopping bridge keeps appending what
	// is queued (default 5 s).
	DrainTimeout time.Duration
	// Now is the clock that stamps events (default time.Now).
	Now func() time.Time
	// Admit passes each event through the gate before it is queued: the
	// gate checks the cluster's bridge writes only its own keys and seals
	// the values of Secrets in place (decision 0037). An event it refuses
	// is dropped. Nil admits everything as it is (tests of the bridge
	// alone; `serve` always sets it).
	Admit  func(ctx context.Context, ev *schemas.Event) error
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Log == nil || c.State == nil {
		return errors.New("kube bridge: log and state are required")
	}
	if err := c.Clusters.Validate(); err != nil {
		return err
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 4096
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Bridge watches the configured clusters and appends their changes to the
// log. Status and Ready are safe for concurrent use.
type Bridge struct {
	cfg      Config
	clusters []*cluster
	started  sync.Once
}

// New validates cfg and returns a bridge; Start runs it.
func New(cfg Config) (*Bridge, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bridge{cfg: cfg}
	for _, c := range cfg.Clusters {
		b.clusters = append(b.clusters, newCluster(c, &b.cfg))
	}
	return b, nil
}

// Start runs every cluster's bridge until ctx ends, then stops the watches,
// appends what is still queued (up to DrainTimeout) and returns nil. A
// cluster that cannot be reached is retried, not fatal: its Status says
// why. Start may be called once.
func (b *Bridge) Start(ctx context.Context) error {
	err := errors.New("kube bridge: Start called twice")
	b.started.Do(func() {
		err = nil
		var wg sync.WaitGroup
		for _, c := range b.clusters {
			wg.Go(func() { c.run(ctx) })
		}
		wg.Wait()
	})
	return err
}

// Status reports every cluster, in configured order.
func (b *Bridge) Status() []Status {
	out := make([]Status, len(b.clusters))
	for i, c := range b.clusters {
		out[i] = c.status()
	}
	return out
}

// Ready is nil once every cluster has synced since Start, else an error
// naming each cluster that has not and what stands in its way.
func (b *Bridge) Ready() error {
	var waiting []string
	for _, c := range b.clusters {
		s := c.status()
		if s.Synced {
			continue
		}
		msg := fmt.Sprintf("cluster %s not synced yet", s.Name)
		if s.LastError != "" {
			msg += ": " + s.LastError
		}
		waiting = append(waiting, msg)
	}
	if len(waiting) == 0 {
		return nil
	}
	return errors.New(strings.Join(waiting, "; "))
}
