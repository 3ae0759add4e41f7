// Package memberfake is an in-memory stand-in for the members bucket, for
// tests of how the reconciler runtime balances, claims, gives up and takes
// over partitions. Time is a fake clock moved by Advance: an instance is
// gone once it has not beaten for Expiry of that clock, and every instance
// that has not crashed beats whenever the clock moves. Every instance sees
// the same live set at once (the real bucket's views agree within a
// heartbeat).
//
// It must not be used outside tests: it shares nothing across processes.
package memberfake

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/reconcilers"
)

// ErrCrashed is what a crashed instance's calls to the bucket return.
var ErrCrashed = errors.New("memberfake: instance crashed")

// Cluster is the shared bucket and clock.
type Cluster struct {
	mu      sync.Mutex
	now     time.Time
	expiry  time.Duration
	beat    map[string]time.Time // instance → its last heartbeat
	crashed map[string]bool
	claims  map[int]string
	// failRelease makes an instance's releases fail (or, when hang,
	// block until their context ends).
	failRelease map[string]bool
	hang        map[string]bool
	live        []string
	changed     chan struct{}
}

// New returns an empty cluster whose instances expire after expiry of
// silence on its clock.
func New(expiry time.Duration) *Cluster {
	return &Cluster{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), expiry: expiry, beat: map[string]time.Time{},
		crashed: map[string]bool{}, claims: map[int]string{}, failRelease: map[string]bool{}, hang: map[string]bool{},
		changed: make(chan struct{})}
}

// Join is a reconcilers.JoinFunc.
func (c *Cluster) Join(_ context.Context, instance string, _ events.MemberOptions) (reconcilers.Members, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.crashed, instance)
	c.beat[instance] = c.now
	c.refresh()
	return &member{c: c, self: instance}, nil
}

// Advance moves the clock by d: every instance not crashed beats, and
// those silent for Expiry are gone.
func (c *Cluster) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for name := range c.beat {
		if !c.crashed[name] {
			c.beat[name] = c.now
		}
	}
	c.refresh()
}

// Crash stops instance's heartbeats and makes its calls fail, as its
// process's death would; its claims stay until it expires.
func (c *Cluster) Crash(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed[instance] = true
}

// FailReleases makes instance's releases fail (hang: block until their
// context ends) until called again with fail false.
func (c *Cluster) FailReleases(instance string, fail, hang bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failRelease[instance], c.hang[instance] = fail, fail && hang
}

// Claims returns a copy of the claims: partition → holder.
func (c *Cluster) Claims() map[int]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]string, len(c.claims))
	for p, h := range c.claims {
		out[p] = h
	}
	return out
}

// Live returns the live instances, sorted.
func (c *Cluster) Live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.live)
}

// refresh recomputes the live set and wakes every waiter; c.mu is held.
func (c *Cluster) refresh() {
	var live []string
	for name, at := range c.beat {
		if c.now.Sub(at) < c.expiry {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	c.live = live
	close(c.changed)
	c.changed = make(chan struct{})
}

type member struct {
	c    *Cluster
	self string
}

var _ reconcilers.Members = (*member)(nil)

func (m *member) Self() string { return m.self }

func (m *member) Live() ([]string, <-chan struct{}) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	live := slices.Clone(m.c.live)
	if !slices.Contains(live, m.self) {
		// An instance counts itself live as long as it runs.
		live = append(live, m.self)
		slices.Sort(live)
	}
	return live, m.c.changed
}

func (m *member) Claim(ctx context.Context, p int) error {
	for {
		m.c.mu.Lock()
		if m.c.crashed[m.self] {
			m.c.mu.Unlock()
			<-ctx.Done()
			return ctx.Err()
		}
		h := m.c.claims[p]
		if h == "" || h == m.self || !slices.Contains(m.c.live, h) {
			m.c.claims[p] = m.self
			m.c.mu.Unlock()
			return nil
		}
		changed := m.c.changed
		m.c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func (m *member) Release(ctx context.Context, p int) error {
	m.c.mu.Lock()
	if m.c.crashed[m.self] || m.c.failRelease[m.self] {
		hang := m.c.hang[m.self]
		m.c.mu.Unlock()
		if hang {
			<-ctx.Done()
			return ctx.Err()
		}
		return ErrCrashed
	}
	defer m.c.mu.Unlock()
	if m.c.claims[p] == m.self {
		delete(m.c.claims, p)
		close(m.c.changed)
		m.c.changed = make(chan struct{})
	}
	return nil
}

func (m *member) Leave(context.Context) error {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.c.crashed[m.self] {
		return ErrCrashed
	}
	delete(m.c.beat, m.self)
	m.c.refresh()
	return nil
}
