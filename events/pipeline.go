package events

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// pipelineWindow is how many of one call's appends may await their
// acknowledgements at once; a longer call waits for a window's before it
// sends the next (the JetStream client stalls its asynchronous publishes
// at the same count).
const pipelineWindow = 4000

// replies receives the acknowledgements of a Log's pipelined appends on
// one subscription of the connection's inbox, and hands each to the
// append that waits for it. It is what the JetStream client's
// asynchronous publishing does, without a future, a timer and a JSON
// decoding per append. Safe for concurrent use.
type replies struct {
	once   sync.Once
	err    error
	prefix string // the inbox and a dot; a reply subject is prefix+token
	sub    *nats.Subscription
	// closed is closed once the subscription has ended with its
	// connection: no acknowledgement comes any more.
	closed chan struct{}

	mu      sync.Mutex
	next    uint64
	waiting map[string]replyTo
}

// replyTo is where one append's acknowledgement goes: entry i of a call
// that waits on ch.
type replyTo struct {
	ch chan<- reply
	i  int
}

type reply struct {
	i   int
	msg *nats.Msg
}

// start subscribes, once.
func (rs *replies) start(nc *nats.Conn) error {
	rs.once.Do(func() {
		inbox := nc.NewInbox()
		rs.prefix = inbox + "."
		rs.waiting = map[string]replyTo{}
		rs.closed = make(chan struct{})
		rs.sub, rs.err = nc.Subscribe(inbox+".*", rs.handle)
		if rs.err == nil {
			// Acknowledgements come as fast as the server stores: never
			// drop one for a slow consumer (a dropped one would leave its
			// append waiting for its context).
			rs.err = rs.sub.SetPendingLimits(-1, -1)
		}
		if rs.err == nil {
			var once sync.Once
			rs.sub.SetClosedHandler(func(string) { once.Do(func() { close(rs.closed) }) })
		}
		if rs.err != nil {
			rs.err = fmt.Errorf("subscribe to acknowledgements: %w", rs.err)
		}
	})
	return rs.err
}

func (rs *replies) handle(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, rs.prefix)
	rs.mu.Lock()
	to, ok := rs.waiting[token]
	delete(rs.waiting, token)
	rs.mu.Unlock()
	if ok {
		// Buffered for every entry of the call: never blocks.
		to.ch <- reply{i: to.i, msg: m}
	}
}

// expect registers entry i of a call and returns the reply subject to
// send it with.
func (rs *replies) expect(ch chan<- reply, i int) (subject, token string) {
	rs.mu.Lock()
	rs.next++
	token = strconv.FormatUint(rs.next, 36)
	rs.waiting[token] = replyTo{ch: ch, i: i}
	rs.mu.Unlock()
	return rs.prefix + token, token
}

// forget drops registrations whose acknowledgements will not be waited
// for (the call's context ended, or its send failed).
func (rs *replies) forget(tokens []string) {
	rs.mu.Lock()
	for _, t := range tokens {
		if t != "" {
			delete(rs.waiting, t)
		}
	}
	rs.mu.Unlock()
}

// pipeline sends msgs without waiting for one acknowledgement before the
// next send, then waits for them all: res[i] and errs[i] are msgs[i]'s,
// errs[i] already translated. A message nobody answered (no responders:
// the stream's leader is changing) is sent again on its own, as publish
// does. Without a deadline the wait for each window is bounded by
// publishTimeout. Once ctx has ended nothing more is sent: the messages
// not sent fail with its error.
func (l *Log) pipeline(ctx context.Context, msgs []*nats.Msg, res []Result, errs []error) {
	if err := l.replies.start(l.nc); err != nil {
		for i := range msgs {
			errs[i] = err
		}
		return
	}
	for lo := 0; lo < len(msgs); lo += pipelineWindow {
		hi := min(lo+pipelineWindow, len(msgs))
		l.pipelineWindow(ctx, msgs[lo:hi], res[lo:hi], errs[lo:hi])
	}
}

func (l *Log) pipelineWindow(ctx context.Context, msgs []*nats.Msg, res []Result, errs []error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, publishTimeout)
		defer cancel()
	}
	ch := make(chan reply, len(msgs))
	tokens := make([]string, len(msgs))
	waiting := 0
	for i, m := range msgs {
		if m == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		m.Reply, tokens[i] = l.replies.expect(ch, i)
		if err := l.nc.PublishMsg(m); err != nil {
			l.replies.forget(tokens[i : i+1])
			tokens[i] = ""
			errs[i] = err
			m.Reply = ""
			continue
		}
		waiting++
	}
	for ; waiting > 0; waiting-- {
		select {
		case r := <-ch:
			tokens[r.i] = ""
			msgs[r.i].Reply = ""
			if isNoResponders(r.msg) {
				res[r.i], errs[r.i] = l.publish(ctx, msgs[r.i])
				continue
			}
			res[r.i], errs[r.i] = parsePubAck(r.msg.Data)
		case <-ctx.Done():
			l.replies.forget(tokens)
			for i, t := range tokens {
				if t != "" {
					errs[i] = ctx.Err()
				}
			}
			return
		case <-l.replies.closed:
			l.replies.forget(tokens)
			for i, t := range tokens {
				if t != "" {
					errs[i] = nats.ErrConnectionClosed
				}
			}
			return
		}
	}
}

// isNoResponders reports the server's answer to a request nobody
// subscribed to: an empty message with status 503.
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}
