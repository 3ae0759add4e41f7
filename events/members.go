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

	"github.com/jetplane/jetplane/internal/retry"
)

// MembersBucket is the key-value bucket of live instances and of partition
// claims.
const MembersBucket = "JP_MEMBERS"

// MemberOptions tune membership.
type MemberOptions struct {
	// Heartbeat is how often an instance says it is alive (default
	// 500 ms).
	Heartbeat time.Duration
	// Expiry is how long an instance may stay silent before the others
	// count it gone and take its partitions (default 3 s). It bounds how
	// long a dead instance's partitions stay idle.
	//
	// Silence is measured on the bucket, not on this instance's clock: an
	// instance is gone when the bucket has stored Expiry's worth of this
	// instance's own heartbeats (by the server's timestamps), and at least
	// three of them, since the other's last one. A stalled bucket (a leader
	// election after a node died) stores nobody's heartbeats, and a slow or
	// paused observer reads the bucket late but in order, so neither makes
	// a live instance look gone. A live instance is wrongly counted gone
	// only when its heartbeats fail to land for Expiry while others' land
	// (a process paused that long); that is the window in which two
	// instances may run the same partition.
	Expiry time.Duration
}

func (o MemberOptions) withDefaults() MemberOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 500 * time.Millisecond
	}
	if o.Expiry <= 0 {
		o.Expiry = 3 * time.Second
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

	mu    sync.Mutex
	heard map[string]heard // other instance → its latest heartbeat
	// clock is the server's timestamp of the newest own heartbeat read
	// back, and beats how many own heartbeats were read back: the
	// bucket's time, which stands still while the bucket stalls.
	clock   time.Time
	beats   int
	live    []string
	changed chan struct{} // closed and replaced when live changes
	claims  map[int]uint64
	// uncertain are partitions whose claim write may have landed after
	// its caller gave up: a claim nobody holds would stall the partition,
	// so the loop removes it.
	uncertain map[int]bool
	claiming  map[int]bool // a Claim is under way: not to be swept

	// The lease: until leaseUntil no other instance can count this one
	// gone; leaseLost is closed (leaseEnded) once that has passed
	// without a renewal, and a renewal after that makes a new channel.
	leaseUntil time.Time
	leaseLost  chan struct{}
	leaseEnded bool
	leaseTimer *time.Timer

	stop func()
	done chan struct{}
}

// Join opens (creating if needed) the members bucket, announces instance
// and keeps announcing it until Leave. ctx bounds the joining only. When
// Join returns, the view already holds every instance announced before.
func (l *Log) Join(ctx context.Context, instance string, opts MemberOptions) (*Members, error) {
	return l.join(ctx, MembersBucket, instance, opts, func(ctx context.Context) (jetstream.KeyValue, error) {
		return createMembersBucket(ctx, l.js, MembersBucket)
	})
}

// createMembersBucket creates bucket, or makes its configuration the
// members buckets' own, with the log's replicas.
func createMembersBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return nil, err
	}
	return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "jetplane instances and their partition claims",
		History:     1,
		Replicas:    s.CachedInfo().Config.Replicas,
		Storage:     jetstream.FileStorage,
	})
}

// join is Join on bucket, opened by open: the instances' own, or a
// controller's (ControllerLog), so that each controller's replicas share
// partitions among themselves only.
func (l *Log) join(ctx context.Context, bucket, instance string, opts MemberOptions, open func(context.Context) (jetstream.KeyValue, error)) (*Members, error) {
	if instance == "" {
		return nil, errors.New("members: an instance name is required")
	}
	opts = opts.withDefaults()
	if opts.Expiry < 2*opts.Heartbeat {
		return nil, fmt.Errorf("members: expiry %s must be at least twice the heartbeat %s", opts.Expiry, opts.Heartbeat)
	}
	kv, err := open(ctx)
	if err != nil {
		return nil, fmt.Errorf("members: open bucket %s: %w", bucket, err)
	}
	m := &Members{kv: kv, self: instance, opts: opts, heard: map[string]heard{},
		changed: make(chan struct{}), claims: map[int]uint64{}, uncertain: map[int]bool{}, claiming: map[int]bool{}, done: make(chan struct{}),
		leaseLost: make(chan struct{})}
	m.leaseTimer = time.AfterFunc(time.Hour, m.checkLease)
	// A process that ran under this name before may have left claims
	// behind (its release cut short by a stop, a crash): while this name
	// lives, no one else takes them, and this process does not hold them.
	// So every partition's claim is looked at once by the sweep, which
	// removes those that name this instance and that it does not hold.
	for p := range l.Partitions() {
		m.uncertain[p] = true
	}
	if err := m.beat(ctx); err != nil {
		m.leaseTimer.Stop()
		return nil, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	updates, err := l.watchMembers(ctx, wctx, bucket, opts)
	if err != nil {
		stop()
		m.leaseTimer.Stop()
		return nil, err
	}
	// Take in the instances announced before us first: claiming with a
	// view that lacks them would take their partitions.
	for initial := true; initial; {
		select {
		case u := <-updates:
			m.note(u)
			initial = u.pending > 0
		case <-ctx.Done():
			stop()
			m.leaseTimer.Stop()
			return nil, fmt.Errorf("members: watch: %w", ctx.Err())
		}
	}
	m.refresh()
	m.stop = stop
	go m.loop(wctx, updates)
	return m, nil
}

// memberUpdate is one change of an instance's announcement.
type memberUpdate struct {
	key      string
	deleted  bool
	created  time.Time
	revision uint64
	pending  uint64 // updates still to come of those stored before
}

// watchMembers follows the announcements, newest per instance first, then
// every change, until ctx ends; opening the read gives up when within
// ends. Its heartbeats are a fraction of the member heartbeat, and
// a read whose server died goes on from where it was on a new consumer
// (see tail), so that a stall (a leader election) delays the view by about
// a second, not by tens.
func (l *Log) watchMembers(within, ctx context.Context, bucket string, opts MemberOptions) (<-chan memberUpdate, error) {
	expiry := max(2*time.Second, 4*opts.Heartbeat)
	t, err := openTailWithin(within, ctx, l.js, "KV_"+bucket, jetstream.ConsumerConfig{
		FilterSubjects: []string{"$KV." + bucket + ".member.>"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}, time.Second, jetstream.PullExpiry(expiry), jetstream.PullHeartbeat(expiry/4))
	if err != nil {
		return nil, fmt.Errorf("members: watch: %w", err)
	}
	out := make(chan memberUpdate, 64)
	go func() {
		defer t.Stop()
		for {
			msg, meta, err := t.Next()
			if err != nil {
				return // ctx ended
			}
			op := msg.Headers().Get("KV-Operation")
			u := memberUpdate{
				key:      strings.TrimPrefix(msg.Subject(), "$KV."+bucket+"."),
				deleted:  op == "DEL" || op == "PURGE",
				created:  meta.Timestamp,
				revision: meta.Sequence.Stream,
				pending:  meta.NumPending,
			}
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// heard is what the bucket last said of another instance.
type heard struct {
	at       time.Time // server timestamp of its latest heartbeat
	beats    int       // own heartbeats read back before it
	revision uint64
}

// note records what an update of the bucket says about an instance.
// Updates come in the bucket's order; one older than what was noted of its
// instance changes nothing.
func (m *Members) note(e memberUpdate) {
	name, ok := memberName(e.key)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case e.deleted:
		delete(m.heard, name)
	case name == m.self:
		if e.created.After(m.clock) {
			m.clock = e.created
			m.beats++
		}
	case e.created.After(m.heard[name].at):
		m.heard[name] = heard{at: e.created, beats: m.beats, revision: e.revision}
	}
}

// goneBeats is how many of its own heartbeats an instance must read back
// after another's last before counting that one gone.
const goneBeats = 3

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
	sent := time.Now()
	if _, err := m.kv.PutString(ctx, memberKey(m.self), m.self); err != nil {
		return fmt.Errorf("members: heartbeat: %w", err)
	}
	m.renew(sent, time.Now())
	return nil
}

// leaseMargin is how long before the others could count this instance
// gone its lease ends: time for a run that honours its context to stop,
// and room for the NATS servers' clocks to differ.
func (o MemberOptions) leaseMargin() time.Duration { return o.Heartbeat }

// renew extends the lease with a heartbeat sent at sent that the bucket
// stored (its answer came at acked). The bucket stored it no earlier than
// sent, and the others count this instance gone only once the bucket has
// stored Expiry's worth of their heartbeats after it: so until
// sent+Expiry no one can. The lease ends leaseMargin before that. A
// heartbeat answered after the lease ended (the process was paused, or
// the bucket unreachable, for that long) starts a new lease: the others
// may have taken the partitions meanwhile.
func (m *Members) renew(sent, acked time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLease(acked)
	until := sent.Add(m.opts.Expiry - m.opts.leaseMargin())
	if !until.After(acked) || !until.After(m.leaseUntil) {
		return
	}
	if m.leaseEnded {
		m.leaseLost, m.leaseEnded = make(chan struct{}), false
	}
	m.leaseUntil = until
	m.leaseTimer.Reset(until.Sub(acked))
}

// expireLease ends the lease if its time has come; m.mu is held.
func (m *Members) expireLease(now time.Time) {
	if !m.leaseEnded && !now.Before(m.leaseUntil) {
		close(m.leaseLost)
		m.leaseEnded = true
	}
}

func (m *Members) checkLease() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLease(time.Now())
}

// Lease is how long this instance surely still counts as live for the
// others: until the time returned, none of them can count it gone and take
// its partitions. lost is closed once that time has passed without a
// heartbeat renewing the lease: the process was paused, or cut off from the
// bucket, and the others may be running its partitions. A lease renewed
// after that is a new one, with a new channel. The lease is checked against
// the clock at every call, so a process resuming from a pause finds it
// lost before any timer has fired.
func (m *Members) Lease() (until time.Time, lost <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLease(time.Now())
	return m.leaseUntil, m.leaseLost
}

func (m *Members) loop(ctx context.Context, updates <-chan memberUpdate) {
	defer close(m.done)
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		t := time.NewTicker(m.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A beat lost in a stall is replaced by a later one;
				// a slow one still counts when it lands.
				bctx, cancel := context.WithTimeout(ctx, m.opts.Expiry/2)
				_ = m.beat(bctx)
				cancel()
			}
		}
	}()
	defer func() { <-beats }()
	check := time.NewTicker(m.opts.Heartbeat / 2)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			m.note(u)
			if stale := m.refresh(); len(stale) > 0 {
				m.tidy(ctx, stale)
			}
		case <-check.C:
			sctx, cancel := context.WithTimeout(ctx, m.opts.Heartbeat)
			m.sweep(sctx)
			cancel()
		}
	}
}

// refresh recomputes the live set and signals a change. It returns the
// instances silent for so long (staleMember) that their announcements can
// go: instance names change with every process by default.
func (m *Members) refresh() (stale map[string]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := []string{m.self} // live as long as it runs
	for name, h := range m.heard {
		silent := m.clock.Sub(h.at)
		if silent < m.opts.Expiry || m.beats-h.beats < goneBeats {
			live = append(live, name)
		} else if silent > staleMember {
			delete(m.heard, name)
			if stale == nil {
				stale = map[string]uint64{}
			}
			stale[name] = h.revision
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, m.live) {
		m.live = live
		close(m.changed)
		m.changed = make(chan struct{})
	}
	return stale
}

// tidy removes the announcements of instances gone long ago, unless they
// spoke again meanwhile.
func (m *Members) tidy(ctx context.Context, stale map[string]uint64) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Heartbeat)
	defer cancel()
	for name, rev := range stale {
		_ = m.kv.Delete(ctx, memberKey(name), jetstream.LastRevision(rev))
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
	m.mu.Lock()
	m.claiming[p] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.claiming, p)
		m.mu.Unlock()
	}()
	// Held by a live instance, or lost a race: look again soon.
	err := retry.Do(ctx, retry.Constant(100*time.Millisecond), nil, func(int) error { return m.tryClaim(ctx, p, key) })
	if err != nil {
		m.abandon(p)
		return ctx.Err()
	}
	return nil
}

// errHeld says a claim is held by a live instance.
var errHeld = errors.New("members: held by a live instance")

// tryClaim makes one attempt, bounded so that an attempt made while the
// bucket has no leader does not hold up the next.
func (m *Members) tryClaim(ctx context.Context, p int, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	e, err := m.kv.Get(ctx, key)
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err = m.kv.Create(ctx, key, []byte(m.self))
	case err != nil:
		return err
	case string(e.Value()) == m.self || !m.isLive(string(e.Value())):
		rev, err = m.kv.Update(ctx, key, []byte(m.self), e.Revision())
	default:
		return errHeld
	}
	if err != nil {
		// The write may have landed all the same: have it swept unless
		// a later attempt takes the claim.
		m.abandon(p)
		return err
	}
	m.setClaim(p, rev)
	return nil
}

func (m *Members) abandon(p int) {
	m.mu.Lock()
	m.uncertain[p] = true
	m.mu.Unlock()
}

// sweep removes claims of this instance that it does not hold.
func (m *Members) sweep(ctx context.Context) {
	m.mu.Lock()
	var ps []int
	for p := range m.uncertain {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	for _, p := range ps {
		e, err := m.kv.Get(ctx, claimKey(p))
		m.mu.Lock()
		_, held := m.claims[p]
		held = held || m.claiming[p]
		m.mu.Unlock()
		switch {
		case held || errors.Is(err, jetstream.ErrKeyNotFound) || (err == nil && string(e.Value()) != m.self):
		case err != nil:
			continue
		default:
			if err := m.kv.Delete(ctx, claimKey(p), jetstream.LastRevision(e.Revision())); err != nil && !isWrongRevision(err) {
				continue
			}
		}
		m.mu.Lock()
		delete(m.uncertain, p)
		m.mu.Unlock()
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
// meanwhile. The claim is forgotten only once the delete succeeded (or
// found the claim taken): after a failure, calling Release again retries
// it, and until then the claim counts as held here.
func (m *Members) Release(ctx context.Context, p int) error {
	m.mu.Lock()
	rev, ok := m.claims[p]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	err := m.kv.Delete(ctx, claimKey(p), jetstream.LastRevision(rev))
	if err != nil && !isWrongRevision(err) {
		return fmt.Errorf("members: release partition %d: %w", p, err)
	}
	m.mu.Lock()
	if m.claims[p] == rev {
		delete(m.claims, p)
	}
	m.mu.Unlock()
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
	m.leaseTimer.Stop()
	m.mu.Lock()
	if !m.leaseEnded {
		close(m.leaseLost)
		m.leaseEnded = true
	}
	m.mu.Unlock()
	if err := m.kv.Delete(ctx, memberKey(m.self)); err != nil {
		return fmt.Errorf("members: leave: %w", err)
	}
	return nil
}
