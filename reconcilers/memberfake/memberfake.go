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

// LeaseMargin is how long before it could be counted gone (Expiry after
// its last heartbeat) an instance's lease ends, as events.Members has it
// with the default heartbeat.
const LeaseMargin = 500 * time.Millisecond

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
	leases      map[string]*lease
}

// lease is an instance's membership lease on the fake clock.
type lease struct {
	until  time.Time
	lost   chan struct{}
	closed bool
}

// New returns an empty cluster whose instances expire after expiry of
// silence on its clock.
func New(expiry time.Duration) *Cluster {
	return &Cluster{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), expiry: expiry, beat: map[string]time.Time{},
		crashed: map[string]bool{}, claims: map[int]string{}, failRelease: map[string]bool{}, hang: map[string]bool{},
		changed: make(chan struct{}), leases: map[string]*lease{}}
}

// Join is a reconcilers.JoinFunc.
func (c *Cluster) Join(_ context.Context, instance string, _ events.MemberOptions) (reconcilers.Members, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.crashed, instance)
	c.leases[instance] = &lease{lost: make(chan struct{})}
	c.beatLocked(instance)
	c.refresh()
	return &member{c: c, self: instance, lease: c.leases[instance]}, nil
}

// beatLocked records a heartbeat of instance now: its lease runs to
// Expiry-LeaseMargin from now, a new lease if the last one ended.
func (c *Cluster) beatLocked(instance string) {
	c.beat[instance] = c.now
	l := c.leases[instance]
	if l == nil {
		return
	}
	if l.closed {
		l.lost, l.closed = make(chan struct{}), false
	}
	l.until = c.now.Add(c.expiry - LeaseMargin)
}

// expireLocked ends the leases whose time has come on the fake clock.
func (c *Cluster) expireLocked() {
	for _, l := range c.leases {
		if !l.closed && !c.now.Before(l.until) {
			close(l.lost)
			l.closed = true
		}
	}
}

// Advance moves the clock by d: every instance not crashed beats, and
// those silent for Expiry are gone.
func (c *Cluster) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for name := range c.beat {
		if !c.crashed[name] {
			c.beatLocked(name)
		}
	}
	c.expireLocked()
	c.refresh()
}

// Crash stops instance's heartbeats and makes its calls fail, as its
// process's death would; its claims stay until it expires.
func (c *Cluster) Crash(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed[instance] = true
}

// Pause cuts instance off from the bucket while its runtime goes on, as a
// process paused (SIGSTOP) or cut off from the cluster's quorum would be:
// its heartbeats stop and its calls to the bucket fail, so the others
// count it gone after Expiry, and its lease ends LeaseMargin before that.
func (c *Cluster) Pause(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed[instance] = true
}

// Resume reconnects a paused instance: it beats again at once.
func (c *Cluster) Resume(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.crashed, instance)
	c.beatLocked(instance)
	c.refresh()
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

// Leased reports whether instance's lease holds.
func (c *Cluster) Leased(instance string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.leases[instance]
	return l != nil && !l.closed
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
	c     *Cluster
	self  string
	lease *lease
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

// Lease reports the instance's lease; its end is given on the real clock,
// as far ahead of time.Now as it is ahead of the fake clock.
func (m *member) Lease() (time.Time, <-chan struct{}) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return time.Now().Add(m.lease.until.Sub(m.c.now)), m.lease.lost
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
	if !m.lease.closed {
		close(m.lease.lost)
		m.lease.closed = true
	}
	m.c.refresh()
	return nil
}
