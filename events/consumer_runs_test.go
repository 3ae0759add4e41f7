package events

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ackedMsg is a delivered message that records its acknowledgement.
type ackedMsg struct {
	jetstream.Msg
	seq   uint64
	acked chan uint64
}

func (m ackedMsg) Ack() error { m.acked <- m.seq; return nil }

// A run's acknowledgement covers only deliveries that are done: one not
// yet done holds back those after it, a delivery made again takes its
// place in stream order, and the done prefix is acknowledged with its
// last message.
func TestRunAcksAcknowledgeTheDonePrefix(t *testing.T) {
	acked := make(chan uint64, 16)
	r := &runAcks{delay: time.Millisecond}
	ps := map[uint64]*pendingAck{}
	for _, seq := range []uint64{10, 11, 12, 13} {
		ps[seq] = r.add(seq, ackedMsg{seq: seq, acked: acked})
	}
	ready := func() (jetstream.Msg, bool, int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ready, r.armed, len(r.out)
	}
	// 11 and 13 done, 10 not: nothing may be acknowledged.
	r.done(ps[11])
	r.done(ps[13])
	if m, armed, n := ready(); m != nil || armed || n != 4 {
		t.Fatalf("with 10 not done: ready %v, armed %v, %d outstanding; want nothing ready", m, armed, n)
	}
	// A delivery made again (sequence 9, lower than those handed over)
	// comes before them.
	ps[9] = r.add(9, ackedMsg{seq: 9, acked: acked})
	r.done(ps[10])
	if m, _, n := ready(); m != nil || n != 5 {
		t.Fatalf("with 9 not done: ready %v, %d outstanding; want nothing ready", m, n)
	}
	r.done(ps[9])
	if got := <-acked; got != 11 {
		t.Fatalf("acknowledged %d, want 11 (9, 10, 11 done; 12 not)", got)
	}
	// Done twice is done once.
	r.done(ps[11])
	r.done(ps[12])
	if got := <-acked; got != 13 {
		t.Fatalf("acknowledged %d, want 13", got)
	}
	if m, _, n := ready(); m != nil || n != 0 {
		t.Fatalf("after all done: ready %v, %d outstanding", m, n)
	}
	select {
	case got := <-acked:
		t.Fatalf("acknowledged %d again", got)
	default:
	}
}

// Deliveries done from many goroutines end with the last one
// acknowledged, whatever the order.
func TestRunAcksConcurrentDone(t *testing.T) {
	acked := make(chan uint64, 1024)
	r := &runAcks{delay: time.Millisecond}
	const n = 500
	ps := make([]*pendingAck, n)
	for i := range n {
		ps[i] = r.add(uint64(i+1), ackedMsg{seq: uint64(i + 1), acked: acked})
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n - 1 - w; i >= 0; i -= 8 {
				r.done(ps[i])
			}
		}()
	}
	wg.Wait()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-acked:
			if got == n {
				return
			}
		case <-deadline:
			t.Fatalf("delivery %d never acknowledged", n)
		}
	}
}
