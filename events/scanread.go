package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetplane/jetplane/internal/retry"
)

// A scan's range reader speaks the pull protocol itself instead of going
// through the client's message iterator. A replay reads every event of the
// log once, and the iterator's work per message (a heartbeat timer reset,
// a channel hand-off to the reading goroutine, the reply subject split
// into strings for its metadata) cost about as much as decoding the event.
// Here the subscription's own goroutine takes each message, reads the
// sequences from the reply subject in place, gathers chunks and prepares
// them; pull requests are sent as the outstanding count runs low, and a
// ticker, not a timer per message, watches for a server gone silent.

const (
	// scanPull is how many messages one pull request asks for; another is
	// sent when fewer than half of that are outstanding.
	scanPull = 4096
	// scanHeartbeat is how often a silent server says it is alive; three
	// missed in a row end the attempt, and the read goes on from where it
	// was on a new consumer.
	scanHeartbeat = time.Second
	// scanExpiry bounds one pull request on the server.
	scanExpiry = 30 * time.Second
)

// errScanStalled ends an attempt whose server went silent or broke the
// order of deliveries; the range is read on from the last message taken.
var errScanStalled = errors.New("range read stalled")

// readRange reads the events from..to and hands them on in chunks of
// scanChunk. last is the scan's last sequence (for Message.Pending). Events
// the log no longer holds (retention) are skipped. A failed attempt (the
// consumer's server died, a leader election, messages dropped on the way)
// goes on from the message after the last one handed on, on a new
// consumer, until ctx ends.
func (l *Log) readRange(ctx context.Context, from, to, last uint64, out func([]Message)) error {
	next := from
	first := true
	err := retry.Do(ctx, retry.Constant(100*time.Millisecond), nil, func(int) error {
		done, err := l.readRangeOnce(ctx, &next, to, last, out)
		switch {
		case err == nil && done:
			return nil
		case err == nil:
			return errScanStalled
		case first && !errors.Is(err, errScanStalled) && !errors.Is(err, context.DeadlineExceeded):
			// The first consumer could not be made for a reason a retry
			// does not fix: a missing stream, a bad configuration.
			return retry.Permanent(err)
		}
		first = false
		return err
	})
	if err != nil {
		return fmt.Errorf("scan log: %w", err)
	}
	return nil
}

// readRangeOnce reads from *next up to to on one consumer. It advances
// *next past every message it hands on, and reports whether the range is
// done.
func (l *Log) readRangeOnce(ctx context.Context, next *uint64, to, last uint64, out func([]Message)) (bool, error) {
	cfg := jetstream.ConsumerConfig{
		Name:              nuid.Next(),
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       *next,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: time.Minute,
	}
	if *next <= 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverAllPolicy, 0
	}
	// The create is not cut short when the scan ends: a create abandoned
	// in flight may still make the consumer after its delete was tried,
	// and it would stay until its inactivity threshold.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	cons, err := l.js.CreateConsumer(cctx, StreamName, cfg)
	cancel()
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			l.removeConsumer(ctx, cfg.Name)
		}
		return false, err
	}
	defer l.removeConsumer(ctx, cfg.Name)
	if cons.CachedInfo().NumPending == 0 {
		// Nothing from *next on where the consumer runs. Either the log
		// holds nothing of *next..to (retention removes from the front and
		// the log denies deletes, so nothing goes from inside it), or
		// the consumer was placed on a replica still taking the log (a
		// cluster node that joins again), which has not got them yet:
		// then they are read again, on a new consumer.
		info, err := l.stream.Info(ctx)
		if err != nil {
			return false, err
		}
		if st := info.State; st.Msgs == 0 || st.FirstSeq > to || st.LastSeq < *next {
			return true, nil
		}
		return false, errScanStalled
	}

	r := &rangeRead{l: l, next: *next, to: to, last: last, out: out, need: to - *next + 1,
		done: make(chan error, 1), chunk: make([]Message, 0, scanChunk)}
	r.pullSubject = "$JS.API.CONSUMER.MSG.NEXT." + StreamName + "." + cfg.Name
	r.inbox = l.nc.NewInbox()
	sub, err := l.nc.Subscribe(r.inbox, r.take)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.refill()
	r.mu.Unlock()

	var result error
	tick := time.NewTicker(scanHeartbeat)
	seen, silent := uint64(0), 0
wait:
	for {
		select {
		case result = <-r.done:
			break wait
		case <-ctx.Done():
			result = ctx.Err()
			break wait
		case <-tick.C:
			if s := r.seen.Load(); s != seen {
				seen, silent = s, 0
			} else if silent++; silent >= 3 {
				result = errScanStalled
				break wait
			}
		}
	}
	tick.Stop()
	_ = sub.Unsubscribe()
	// The callback may still be running; take the position under its lock.
	r.mu.Lock()
	r.stopped = true
	*next = r.next
	finished := r.finished
	r.mu.Unlock()
	if finished {
		return true, nil
	}
	return false, result
}

// rangeRead is one attempt's state, changed by the subscription's
// callback under mu.
type rangeRead struct {
	l           *Log
	pullSubject string
	inbox       string
	to, last    uint64
	out         func([]Message)
	seen        atomic.Uint64 // messages and heartbeats received

	mu          sync.Mutex
	next        uint64 // sequence after the last message handed on
	dseq        uint64 // consumer sequence of the last message taken
	need        uint64 // sequences of the range not yet asked for
	outstanding uint64 // messages asked for and not yet received
	chunk       []Message
	stopped     bool // the attempt is over; take ignores what comes
	finished    bool // the range has been handed on whole
	done        chan error
}

// take handles one message of the subscription.
func (r *rangeRead) take(msg *nats.Msg) {
	r.seen.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if len(msg.Data) == 0 && msg.Header != nil {
		if code := msg.Header.Get("Status"); code != "" {
			if code == "100" { // idle heartbeat or flow control
				if msg.Reply != "" {
					_ = r.l.nc.Publish(msg.Reply, nil)
				}
				return
			}
			// 408 (a request expired), 409 (consumer deleted, leader
			// changed, server shutting down): go on from here on a new
			// consumer.
			r.end(fmt.Errorf("%w: status %s %s", errScanStalled, code, msg.Header.Get("Description")))
			return
		}
	}
	sseq, dseq, pending, ok := ackSequences(msg.Reply)
	if !ok || dseq != r.dseq+1 {
		// Not a delivery, or one was dropped on the way.
		r.end(fmt.Errorf("%w: delivery %d after %d (%q)", errScanStalled, dseq, r.dseq, msg.Reply))
		return
	}
	r.dseq = dseq
	if r.outstanding > 0 {
		r.outstanding--
	}
	if sseq > r.to {
		r.finish()
		return
	}
	r.chunk = append(r.chunk, Message{Data: msg.Data, Sequence: sseq, Pending: r.last - sseq, Subject: msg.Subject})
	r.next = sseq + 1
	if len(r.chunk) == scanChunk {
		r.out(r.chunk)
		r.chunk = make([]Message, 0, scanChunk)
	}
	if sseq == r.to || pending == 0 {
		r.finish()
		return
	}
	r.refill()
}

// refill asks for more messages when fewer than half a request's worth
// are outstanding, never for more than the range's remaining sequences
// (events removed by retention make that an overestimate, never short).
func (r *rangeRead) refill() {
	if r.outstanding > scanPull/2 || r.need == 0 {
		return
	}
	n := min(uint64(scanPull), r.need)
	req := `{"batch":` + strconv.FormatUint(n, 10) +
		`,"expires":` + strconv.FormatInt(int64(scanExpiry), 10) +
		`,"idle_heartbeat":` + strconv.FormatInt(int64(scanHeartbeat), 10) + `}`
	if err := r.l.nc.PublishRequest(r.pullSubject, r.inbox, []byte(req)); err != nil {
		r.end(fmt.Errorf("%w: pull: %v", errScanStalled, err))
		return
	}
	r.need -= n
	r.outstanding += n
}

// finish hands on the last chunk and ends the attempt with the range done.
func (r *rangeRead) finish() {
	if len(r.chunk) > 0 {
		r.out(r.chunk)
		r.chunk = nil
	}
	r.finished = true
	r.end(nil)
}

// end ends the attempt; messages gathered so far are handed on, so that
// the next attempt goes on after them.
func (r *rangeRead) end(err error) {
	if !r.finished && len(r.chunk) > 0 {
		r.out(r.chunk)
		r.chunk = make([]Message, 0, scanChunk)
	}
	r.stopped = true
	r.done <- err
}

// removeConsumer deletes a scan's consumer in the background; if that
// fails, the server removes it once inactive.
func (l *Log) removeConsumer(ctx context.Context, name string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.js.DeleteConsumer(ctx, StreamName, name)
	}()
}

// ackSequences reads the stream sequence, consumer sequence and pending
// count from a delivery's reply subject, in either form the server sends:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<time>.<pending>
// or, with a domain and account hash before the stream, twelve tokens or
// more.
func ackSequences(reply string) (sseq, dseq, pending uint64, ok bool) {
	var starts [13]int
	n := 0
	starts[n], n = 0, 1
	for i := 0; i < len(reply); i++ {
		if reply[i] == '.' {
			if n == len(starts) {
				return 0, 0, 0, false
			}
			starts[n] = i + 1
			n++
		}
	}
	token := func(i int) string {
		end := len(reply)
		if i+1 < n {
			end = starts[i+1] - 1
		}
		return reply[starts[i]:end]
	}
	if n < 9 || token(0) != "$JS" || token(1) != "ACK" {
		return 0, 0, 0, false
	}
	base := 5 // sseq's token in the short form
	if n >= 12 {
		base = 7
	}
	var err1, err2, err3 error
	sseq, err1 = strconv.ParseUint(token(base), 10, 64)
	dseq, err2 = strconv.ParseUint(token(base+1), 10, 64)
	pending, err3 = strconv.ParseUint(token(base+3), 10, 64)
	return sseq, dseq, pending, err1 == nil && err2 == nil && err3 == nil
}
