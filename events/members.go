package events

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MembersBucket is the key-value bucket of live instances and of partition
// claims.
const MembersBucket = "JP_MEMBERS"

// MemberOptions tune membership.
type MemberOptions struct {
	// Heartbeat is how often an instance says it is alive (default 1 s).
	Heartbeat time.Duration
	// Expiry is how long an instance may stay silent before the others
	// count it gone and take its partitions (default 4 s). It bounds how
	// long a dead instance's partitions stay idle, and is the overlap
	// window when a live instance is wrongly counted gone (a pause longer
	// than Expiry).
	Expiry time.Duration
}

func (o MemberOptions) withDefaults() MemberOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.Expiry <= 0 {
		o.Expiry = 4 * time.Second
	}
	return o
}

// Members is this instance's view of the live instances, kept from
// heartbeats in the MembersBucket, and its partition claims there. Every
// instance derives the same view from the same bucket, give or take a
// heartbeat; claims make the hand-over of a partition exclusive even while
// two views briefly disagree.
type Members struct {
	kv   jetstream.KeyValue
	self string
	opts MemberOptions

	mu      sync.Mutex
	seen    map[string]time.Time // instance → when last heard from
	live    []string
	changed chan struct{} // closed and replaced when live changes
	claims  map[int]uint64

	stop func()
	done chan struct{}
}

// Join opens (creating if needed) the members bucket, announces instance
// and keeps announcing it until Leave. ctx bounds the joining only. When
// Join returns, the view already holds every instance announced before.
func (l *Log) Join(ctx context.Context, instance string, opts MemberOptions) (*Members, error) {
	if instance == "" {
		return nil, errors.New("members: an instance name is required")
	}
	opts = opts.withDefaults()
	if opts.Expiry < 2*opts.Heartbeat {
		return nil, fmt.Errorf("members: expiry %s must be at least twice the heartbeat %s", opts.Expiry, opts.Heartbeat)
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      MembersBucket,
		Description: "jetplane instances and their partition claims",
		History:     1,
		Replicas:    info.Config.Replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("members: open bucket %s: %w", MembersBucket, err)
	}
	m := &Members{kv: kv, self: instance, opts: opts, seen: map[string]time.Time{},
		changed: make(chan struct{}), claims: map[int]uint64{}, done: make(chan struct{})}
	if err := m.beat(ctx); err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := kv.Watch(wctx, "member.*")
	if err != nil {
		stop()
		return nil, fmt.Errorf("members: watch: %w", err)
	}
	// Take in the instances announced before us first: claiming with a
	// view that lacks them would take their partitions.
	for initial := true; initial; {
		select {
		case e := <-w.Updates():
			if e == nil {
				initial = false
				continue
			}
			m.note(wctx, e, true)
		case <-ctx.Done():
			stop()
			_ = w.Stop()
			return nil, fmt.Errorf("members: watch: %w", ctx.Err())
		}
	}
	m.refresh(time.Now())
	m.stop = stop
	go m.loop(wctx, w)
	return m, nil
}

// note records what an update of the bucket says about an instance.
// Updates of the initial view are judged by when they were written, so that
// a dead instance is not counted live for a whole expiry after we start.
func (m *Members) note(ctx context.Context, e jetstream.KeyValueEntry, initial bool) {
	name, ok := memberName(e.Key())
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case e.Operation() != jetstream.KeyValuePut:
		delete(m.seen, name)
	case initial:
		m.seen[name] = e.Created()
		if time.Since(e.Created()) > staleMember {
			// Gone long ago (instance names change with every process
			// by default): tidy the bucket.
			_ = m.kv.Delete(ctx, e.Key(), jetstream.LastRevision(e.Revision()))
		}
	default:
		m.seen[name] = time.Now()
	}
}

func memberKey(instance string) string {
	// Key tokens allow few characters; instance names may hold any.
	return "member." + base64.RawURLEncoding.EncodeToString([]byte(instance))
}

// staleMember is how long a silent instance's announcement stays in the
// bucket before a starting instance removes it.
const staleMember = time.Hour

func memberName(key string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(key, "member."))
	return string(b), err == nil && strings.HasPrefix(key, "member.")
}

func claimKey(p int) string { return "claim." + strconv.Itoa(p) }

func (m *Members) beat(ctx context.Context) error {
	if _, err := m.kv.PutString(ctx, memberKey(m.self), m.self); err != nil {
		return fmt.Errorf("members: heartbeat: %w", err)
	}
	return nil
}

func (m *Members) loop(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(m.done)
	defer func() { _ = w.Stop() }()
	beat := time.NewTicker(m.opts.Heartbeat)
	defer beat.Stop()
	check := time.NewTicker(m.opts.Heartbeat / 2)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				m.note(ctx, e, false)
				m.refresh(time.Now())
			}
		case <-beat.C:
			bctx, cancel := context.WithTimeout(ctx, m.opts.Expiry)
			_ = m.beat(bctx) // a missed beat is retried at the next tick
			cancel()
		case <-check.C:
			m.refresh(time.Now())
		}
	}
}

// refresh recomputes the live set and signals a change.
func (m *Members) refresh(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[m.self] = now // this instance is live as long as it runs
	var live []string
	for name, at := range m.seen {
		if now.Sub(at) < m.opts.Expiry {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, m.live) {
		m.live = live
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// Live returns the live instances, sorted, and a channel closed when that
// set next changes.
func (m *Members) Live() ([]string, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.live), m.changed
}

// Self is this instance's name.
func (m *Members) Self() string { return m.self }

func (m *Members) isLive(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.live, name)
}

// Claim makes this instance the holder of partition p. It waits while
// another live instance holds p (that instance releases it when it has
// finished the runs it started there), and takes p at once from a holder
// that is gone. Claims are compare-and-set on the bucket, so two instances
// never both succeed.
func (m *Members) Claim(ctx context.Context, p int) error {
	key := claimKey(p)
	for {
		e, err := m.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, cerr := m.kv.Create(ctx, key, []byte(m.self))
			if cerr == nil {
				m.setClaim(p, rev)
				return nil
			}
			err = cerr
		case err != nil:
		case string(e.Value()) == m.self || !m.isLive(string(e.Value())):
			rev, uerr := m.kv.Update(ctx, key, []byte(m.self), e.Revision())
			if uerr == nil {
				m.setClaim(p, rev)
				return nil
			}
			err = uerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Held by a live instance, or lost a race: look again soon.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Members) setClaim(p int, rev uint64) {
	m.mu.Lock()
	m.claims[p] = rev
	m.mu.Unlock()
}

// Holder returns the instance holding partition p ("" if none).
func (m *Members) Holder(ctx context.Context, p int) (string, error) {
	e, err := m.kv.Get(ctx, claimKey(p))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// Release gives partition p up, unless another instance has taken it
// meanwhile.
func (m *Members) Release(ctx context.Context, p int) error {
	m.mu.Lock()
	rev, ok := m.claims[p]
	delete(m.claims, p)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	err := m.kv.Delete(ctx, claimKey(p), jetstream.LastRevision(rev))
	if err != nil && !isWrongRevision(err) {
		return fmt.Errorf("members: release partition %d: %w", p, err)
	}
	return nil
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && isConflictCode(int(apiErr.ErrorCode))
}

// Leave stops the heartbeat and withdraws this instance, so that the
// others take its partitions without waiting for it to expire. Release the
// partitions first.
func (m *Members) Leave(ctx context.Context) error {
	m.stop()
	<-m.done
	if err := m.kv.Delete(ctx, memberKey(m.self)); err != nil {
		return fmt.Errorf("members: leave: %w", err)
	}
	return nil
}
