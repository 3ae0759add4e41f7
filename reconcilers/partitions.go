package reconcilers

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/retry"
	"github.com/jetplane/jetplane/projections"
)

// priorityGroup is the pinned group every partition consumer has.
const priorityGroup = "jp"

// partitions tracks which partitions of the key space this instance runs.
// A partition is active from the moment its claim is taken (and its keys
// enqueued) until it is given up; only keys of active partitions run, and
// giving a partition up waits for its runs in flight before the claim is
// released, so two instances run a partition's keys at the same time only
// when one was wrongly counted gone (see events.MemberOptions.Expiry).
type partitions struct {
	rt *Runtime
	n  int

	// runCtx is the runtime's context for runs (it outlives the runtime's
	// own by the grace period); set before the first partition is taken.
	runCtx context.Context

	mu      sync.Mutex
	on      map[int]bool
	running map[int]int
	idle    *sync.Cond // signalled when a partition's running count drops
	// runs are the partitions' run contexts: cancelled once a partition
	// has been giving up for the grace period, so that a stuck run does
	// not hold the partition here for ever, and when the lease it was
	// claimed under ends.
	runs map[int]*runContext

	// draining is closed when the process's shutdown begins: no partition
	// is claimed after that (see Runtime.Drain).
	draining  chan struct{}
	drainOnce sync.Once

	resync chan struct{}
}

func newPartitions(rt *Runtime, n int) *partitions {
	if n < 1 {
		n = 1
	}
	ps := &partitions{rt: rt, n: n, on: map[int]bool{}, running: map[int]int{}, resync: make(chan struct{}, 1),
		runCtx: context.Background(), runs: map[int]*runContext{}, draining: make(chan struct{})}
	ps.idle = sync.NewCond(&ps.mu)
	return ps
}

// of is k's partition.
func (ps *partitions) of(k projections.Key) int { return events.Partition(k.Proto(), ps.n) }

func (ps *partitions) active(p int) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.on[p]
}

// begin starts a run in partition p, if p is active here and the lease it
// was claimed under still holds, and returns the context the run must
// honour.
func (ps *partitions) begin(p int) (context.Context, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.on[p] || ps.runs[p].Err() != nil {
		return nil, false
	}
	ps.running[p]++
	return ps.runs[p], true
}

func (ps *partitions) end(p int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.running[p]--
	ps.idle.Broadcast()
}

// kindFilters are p's consumer's filters when the runtime reads its own
// kinds' events only (Config.OwnKindsOnly), nil otherwise.
func (ps *partitions) kindFilters(p int) []string {
	if !ps.rt.cfg.OwnKindsOnly {
		return nil
	}
	out := make([]string, 0, len(ps.rt.byKind))
	for kind := range ps.rt.byKind {
		out = append(out, events.KindPartitionFilter(p, kind))
	}
	slices.Sort(out)
	return out
}

// resyncAll asks for every key of every active partition to be enqueued
// again (the projection folded changes it did not report one by one). It
// does not block.
func (ps *partitions) resyncAll() {
	select {
	case ps.resync <- struct{}{}:
	default:
	}
}

// Assign gives each of n partitions to one of the live instances: every
// instance computing it from the same set gets the same answer. Each
// partition goes to the instance ranking it highest (rendezvous hashing,
// so a join or a leave moves few partitions), except that shares stay even:
// each instance gets n/len(live) partitions, and n%len(live) of them one
// more.
func Assign(n int, live []string) map[int]string {
	out := make(map[int]string, n)
	if len(live) == 0 {
		return out
	}
	share, extra := n/len(live), n%len(live)
	load := map[string]int{}
	ranked := slices.Clone(live)
	for p := range n {
		slices.SortFunc(ranked, func(a, b string) int {
			ha, hb := rank(p, a), rank(p, b)
			switch {
			case ha > hb:
				return -1
			case ha < hb:
				return 1
			}
			return 0
		})
		for _, inst := range ranked {
			if load[inst] < share || (load[inst] == share && extra > 0) {
				if load[inst] == share {
					extra--
				}
				out[p] = inst
				load[inst]++
				break
			}
		}
	}
	return out
}

func rank(p int, instance string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(instance))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(p)))
	// fnv's last bytes mix poorly into the high bits; finish with a
	// multiply-xorshift so that ranks spread evenly.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// holding is one partition this instance holds, or is claiming or giving
// up.
type holding struct {
	cancel context.CancelFunc
	done   chan struct{}
	// fenced says it is given up because the lease ended: the bucket
	// may be electing a leader, and unpinning (which only hurries the
	// hand-over) would wait for it.
	fenced atomic.Bool
}

// balance keeps this instance holding the partitions Assign gives it, as
// instances come and go, until ctx ends; then it gives every partition up.
func (ps *partitions) balance(ctx context.Context, members Members) {
	held := map[int]*holding{}
	finished := make(chan int, ps.n)
	defer func() {
		for _, h := range held {
			h.cancel()
		}
		for _, h := range held {
			<-h.done
		}
	}()
	var last []string
	// While the lease is lost, look for a new one this often.
	relook := time.NewTicker(100 * time.Millisecond)
	defer relook.Stop()
	fenced := false
	for {
		live, changed := members.Live()
		if !slices.Equal(live, last) {
			ps.rt.cfg.Logger.Info("instances changed", "live", live)
			last = live
		}
		_, lost := members.Lease()
		leased := !isClosed(lost)
		switch {
		case !leased && !fenced:
			// Paused or cut off for so long that the others may have
			// counted this instance gone and taken its partitions: every
			// run in flight is already cancelled (their contexts end with
			// the lease); give every partition up, and claim again only
			// with a new lease.
			ps.rt.cfg.Logger.Warn("membership lease ended (this process was paused or cut off); runs in flight cancelled, giving every partition up until the lease is renewed",
				"held", len(held))
			fenced = true
		case leased && fenced:
			ps.rt.cfg.Logger.Info("membership lease renewed; claiming partitions again")
			fenced = false
		}
		draining := isClosed(ps.draining)
		assigned := Assign(ps.n, live)
		for p, h := range held {
			if assigned[p] != members.Self() || !leased || (draining && !ps.active(p)) {
				if !leased {
					h.fenced.Store(true)
				}
				h.cancel()
			}
		}
		for p := range ps.n {
			if leased && !draining && assigned[p] == members.Self() && held[p] == nil {
				hctx, cancel := context.WithCancel(ctx)
				h := &holding{cancel: cancel, done: make(chan struct{})}
				held[p] = h
				go func() {
					defer close(h.done)
					defer func() { finished <- p }()
					ps.hold(ctx, hctx, p, members, &h.fenced)
				}()
			}
		}
		// Wait for the lease to end while it holds, for a new one (looked
		// for now and then) while it does not.
		var wait <-chan time.Time
		if !leased {
			wait, lost = relook.C, nil
		}
		// Once draining, the partitions still held give up as their runs
		// end: look again now and then, rather than on every turn of a
		// channel that stays closed (which spun this loop).
		drain, drainPoll := ps.draining, (<-chan time.Time)(nil)
		if draining {
			drain = nil
			if len(held) > 0 {
				drainPoll = time.After(10 * time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-lost:
		case <-wait:
		case <-drain:
		case <-drainPoll:
		case p := <-finished:
			// Given up (or failed): forget it, and take it again if it is
			// still assigned here.
			if h := held[p]; h != nil {
				<-h.done
				delete(held, p)
			}
		case <-ps.resync:
			ps.enqueueActive()
		}
	}
}

// hold claims partition p, runs it until ctx ends, then gives it up.
// stopping ends when the whole runtime stops.
func (ps *partitions) hold(stopping, ctx context.Context, p int, members Members, fenced *atomic.Bool) {
	rt := ps.rt
	log := rt.cfg.Logger.With("partition", p)
	asked := time.Now()
	// The partition's runs go on only under the lease held when the claim
	// was made: once it ends, the others may take the claim.
	_, lost := members.Lease()
	if isClosed(lost) {
		return
	}
	// Once shutdown has begun, claim nothing more.
	claimCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	go func() {
		select {
		case <-ps.draining:
			stopClaiming()
		case <-claimCtx.Done():
		}
	}()
	if err := members.Claim(claimCtx, p); err != nil {
		return // ctx ended first (the partition went elsewhere), or shutdown began
	}
	stopClaiming()
	ps.mu.Lock()
	ps.on[p] = true
	ps.runs[p] = newRunContext(ps.runCtx, members, lost)
	ps.mu.Unlock()
	keys, start := ps.enqueue(p)
	log.Info("partition taken", "keys", keys, "waited", time.Since(asked).Round(time.Millisecond))
	consumer := events.PartitionConsumer(rt.cfg.Consumer, p)
	// A read that fails (NATS electing a leader, a consumer lost) is
	// read again soon, for as long as p is held; while an election lasts
	// every attempt fails: say so at the first and then every tenth. A
	// read that ran for a minute before failing starts the count again.
	//
	// A read that ends drops the deliveries the client had buffered but
	// not handed over, and the server may still send some to its pull
	// request until that expires (PinnedTTL/2): the log sends them again
	// only after the consumer's AckWait (minutes). So after a read that
	// had delivered, every key of p is enqueued again, as at take-over, at
	// once and once more when no stale pull can receive anything; runs
	// that find nothing changed write nothing. (During an election
	// attempts deliver nothing, and nothing is enqueued at every attempt.)
	ttl := rt.cfg.PinnedTTL
	if ttl <= 0 {
		ttl = 4 * time.Second
	}
	failures, got := 0, 0
	// One frontier for every read of this holding: a delivery of an
	// earlier read may still be running when a later read's are done.
	acks := newAckFrontier()
	count := func(d events.Delivery) {
		got++
		rt.trigger(acks.track(d))
	}
	_ = retry.Do(ctx, retry.Constant(250*time.Millisecond), func(_ int, err error, _ time.Duration) {
		if failures++; retry.Often(failures) {
			log.Warn("partition consumer stopped; reading it again", "err", err, "attempts", failures)
		}
		if got > 0 {
			got = 0
			var n int
			n, start = ps.enqueue(p)
			log.Info("partition keys enqueued again after the read ended", "keys", n)
			time.AfterFunc(ttl, func() {
				if ps.active(p) {
					ps.enqueue(p)
				}
			})
		}
	}, func(int) error {
		began := time.Now()
		err := rt.cfg.Log.Consume(ctx, events.ConsumerOptions{
			Name: consumer, Filter: events.PartitionFilter(p), Filters: ps.kindFilters(p),
			PriorityGroup: priorityGroup, PinnedTTL: rt.cfg.PinnedTTL,
			AckAll: true, Replaces: rt.replaced(p),
			// Every key was enqueued at start (at take-over, or once a
			// read that had delivered ended): a consumer the log lost
			// with its server starts after it (decision 0109).
			MemoryState: true, StartAfter: start,
		}, count)
		if time.Since(began) > time.Minute {
			failures = 0
		}
		if err == nil {
			err = errors.New("read ended")
		}
		return err
	})
	ps.giveUp(stopping, p, consumer, members, log, fenced.Load(), acks)
}

// giveUp stops runs of p from starting, waits for those in flight, then
// lets the next holder in: it unpins p's consumer and releases the claim.
// Deliveries of p not yet covered by a run are acknowledged: the next
// holder runs every key of p anyway.
func (ps *partitions) giveUp(stopping context.Context, p int, consumer string, members Members, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, fenced bool, acks *ackFrontier) {
	rt := ps.rt
	started := time.Now()
	ps.mu.Lock()
	ps.on[p] = false
	cancelRuns := ps.runs[p].stop
	// Runs get the grace period to end; then their context is cancelled,
	// and a run stuck in a call that honours it ends.
	overdue := time.AfterFunc(rt.cfg.Grace, func() {
		log.Warn("runs in flight outlived the grace period; cancelling them", "grace", rt.cfg.Grace)
		cancelRuns()
	})
	for ps.running[p] > 0 {
		ps.idle.Wait()
	}
	delete(ps.runs, p)
	ps.mu.Unlock()
	overdue.Stop()
	cancelRuns()
	for _, c := range rt.byKind {
		c.dropPartition(p)
	}
	// Every delivery of p is done now: tell the log before the next
	// holder reads the consumer.
	acks.flush()
	if !fenced {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := rt.cfg.Log.Unpin(ctx, consumer, priorityGroup); err != nil {
			log.Warn("unpinning the partition consumer failed; it unpins itself after its TTL", "err", err)
		}
		cancel()
	}
	// The next holder waits for the release as long as this instance
	// lives: keep trying (the cluster may be electing a leader). Once the
	// runtime stops, leaving the members bucket frees the claim too, so
	// the tries end half a grace period after the stop (or after giving
	// up began, if later); every pause and attempt ends with them.
	tries, stopTrying := context.WithCancel(context.Background())
	defer stopTrying()
	unwatch := context.AfterFunc(stopping, func() {
		// At least a second, so that one attempt is made.
		time.AfterFunc(max(rt.cfg.Grace/2-time.Since(started), time.Second), stopTrying)
	})
	defer unwatch()
	err := retry.Do(tries, retry.Constant(500*time.Millisecond), func(attempt int, err error, _ time.Duration) {
		if retry.Often(attempt) {
			log.Warn("releasing the partition failed; retrying", "err", err, "attempts", attempt)
		}
	}, func(int) error {
		ctx, cancel := context.WithTimeout(tries, 10*time.Second)
		defer cancel()
		return members.Release(ctx, p)
	})
	if err != nil {
		log.Warn("releasing the partition failed; it moves when this instance leaves or expires", "err", err)
		return
	}
	log.Info("partition released", "waited", time.Since(started).Round(time.Millisecond))
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// keysWhere is a State that selects keys before ordering them
// (projections.Store): a partition's keys are a small part of a kind's.
type keysWhere interface {
	KeysWhere(q projections.Query, keep func(projections.Key) bool) ([]projections.Key, uint64)
}

// enqueue queues every key of partition p of every handled kind, and
// reports how many, and the sequence of the state their runs read at least
// (every event up to it is covered by them).
func (ps *partitions) enqueue(p int) (int, uint64) {
	n, at := 0, uint64(0)
	for kind, c := range ps.rt.byKind {
		// A bare kind lists every group's; keep this kind's own.
		keep := func(k projections.Key) bool { return k.Kind == kind && ps.of(k) == p }
		var mine []projections.Key
		var seq uint64
		if kw, ok := ps.rt.cfg.State.(keysWhere); ok {
			// Selected before they are ordered, under the store's lock:
			// with every key of the kind sorted first, taking partitions
			// over (and reading them again) held the store for the
			// whole kind each time.
			mine, seq = kw.KeysWhere(projections.Query{Kind: kind}, keep)
		} else {
			var keys []projections.Key
			keys, seq = ps.rt.cfg.State.Keys(projections.Query{Kind: kind})
			for _, k := range keys {
				if keep(k) {
					mine = append(mine, k)
				}
			}
		}
		c.addAll(mine, seq)
		n += len(mine)
		if at == 0 || seq < at {
			at = seq
		}
	}
	return n, at
}

// enqueueActive queues every key of every active partition.
func (ps *partitions) enqueueActive() {
	for _, p := range ps.held() {
		ps.enqueue(p)
	}
}

// held lists the partitions active here.
func (ps *partitions) held() []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var on []int
	for p, ok := range ps.on {
		if ok {
			on = append(on, p)
		}
	}
	slices.Sort(on)
	return on
}

// replaced names the consumers partition p's consumer supersedes: its
// name before decision 0108, and both names under each earlier prefix.
func (rt *Runtime) replaced(p int) []string {
	names := []string{events.ExplicitAckPartitionConsumer(rt.cfg.Consumer, p)}
	for _, e := range rt.cfg.Earlier {
		names = append(names, events.PartitionConsumer(e, p), events.ExplicitAckPartitionConsumer(e, p))
	}
	return names
}
