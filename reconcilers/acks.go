package reconcilers

import (
	"slices"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events"
)

// ackDelay is how long a partition's acknowledgement may wait for the
// deliveries done after it to join it. Acknowledging later only widens
// what a crash brings back, and a take-over runs every key anyway.
const ackDelay = 5 * time.Millisecond

// ackFrontier acknowledges one partition consumer's deliveries, read with
// the ack-all policy, once for many (decision 0108). A delivery handed to
// the runtime is done when the runtime acknowledges it (its run ended, or
// it needed none); the log is told, at most every ackDelay, the newest
// delivery before which every delivery is done: rule 8 holds for each
// delivery while one acknowledgement covers many.
//
// Deliveries come in stream order, except those the log sends again,
// which are put in their place. Every delivery handed out must be done
// eventually, or the frontier stops there (and the log sends what follows
// again after the consumer's AckWait).
type ackFrontier struct {
	mu sync.Mutex
	// out are the deliveries handed out and not yet covered by an
	// acknowledgement, by sequence.
	out []pendingAck
	// acked is the newest sequence acknowledged or due to be.
	acked uint64
	// due is the delivery to acknowledge next; set while a flush is
	// scheduled.
	due       *events.Delivery
	scheduled bool
	flushFn   func() // f.flush, made once
}

type pendingAck struct {
	d    events.Delivery
	done bool
}

func newAckFrontier() *ackFrontier {
	f := &ackFrontier{}
	f.flushFn = f.flush
	return f
}

// track records d as handed out and returns it with an Ack that marks it
// done.
func (f *ackFrontier) track(d events.Delivery) events.Delivery {
	seq := d.Sequence
	f.mu.Lock()
	if seq <= f.acked {
		// Sent again, though acknowledged already (the acknowledgement
		// crossed it): nothing to wait for.
		f.mu.Unlock()
		return d
	}
	if n := len(f.out); n == 0 || f.out[n-1].d.Sequence < seq {
		f.out = append(f.out, pendingAck{d: d})
	} else {
		i, found := slices.BinarySearchFunc(f.out, seq, func(p pendingAck, s uint64) int { return cmpSeq(p.d.Sequence, s) })
		if found {
			// The same message sent again while its first delivery is
			// out: either one's acknowledgement covers it.
			f.mu.Unlock()
			return d.OnAck(func() error { return nil })
		}
		f.out = slices.Insert(f.out, i, pendingAck{d: d})
	}
	f.mu.Unlock()
	return d.OnAck(func() error { f.done(seq); return nil })
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// done marks the delivery of seq done and moves the frontier past every
// done delivery at its head.
func (f *ackFrontier) done(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, found := slices.BinarySearchFunc(f.out, seq, func(p pendingAck, s uint64) int { return cmpSeq(p.d.Sequence, s) })
	if !found {
		return
	}
	f.out[i].done = true
	if i != 0 {
		return
	}
	n := 0
	for n < len(f.out) && f.out[n].done {
		n++
	}
	last := f.out[n-1].d
	f.out = slices.Delete(f.out, 0, n)
	f.acked = last.Sequence
	f.due = &last
	if !f.scheduled {
		f.scheduled = true
		time.AfterFunc(ackDelay, f.flushFn)
	}
}

// flush sends the acknowledgement due, if any.
func (f *ackFrontier) flush() {
	f.mu.Lock()
	d := f.due
	f.due, f.scheduled = nil, false
	f.mu.Unlock()
	if d != nil {
		_ = d.Ack()
	}
}
