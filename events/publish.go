package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishTimeout bounds the wait for an acknowledgement when the caller's
// context has no deadline: a server that cannot write its store does not
// answer at all. It is the JetStream client's default timeout of Open.
const publishTimeout = 15 * time.Second

// publish sends m to the log and waits for the server's acknowledgement,
// as jetstream.PublishMsg does — at most publishTimeout without a
// deadline, again twice after a short wait while no server answers — but
// through the log's acknowledgement subscription (replies), with a
// timer rather than a derived context, and reading the acknowledgement's
// usual form without reflection: every single-object write passes here.
// An acknowledgement in any other form, an error among them, is decoded
// as JSON, and an error comes back as the *jetstream.APIError PublishMsg
// would return.
func (l *Log) publish(ctx context.Context, m *nats.Msg) (Result, error) {
	rs := &l.replies
	if err := rs.start(l.nc); err != nil {
		return Result{}, err
	}
	var timeout <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(publishTimeout)
		defer t.Stop()
		timeout = t.C
	}
	ch := make(chan reply, 1)
	for attempt := 0; ; attempt++ {
		// An ended context sends nothing, as PublishMsg does: its
		// caller is told the write failed, so it must not be stored.
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		subject, token := rs.expect(ch, 0)
		m.Reply = subject
		err := l.nc.PublishMsg(m)
		m.Reply = ""
		if err != nil {
			rs.forget([]string{token})
			return Result{}, err
		}
		var r reply
		select {
		case r = <-ch:
		case <-ctx.Done():
			rs.forget([]string{token})
			return Result{}, ctx.Err()
		case <-timeout:
			rs.forget([]string{token})
			return Result{}, context.DeadlineExceeded
		case <-rs.closed:
			rs.forget([]string{token})
			return Result{}, nats.ErrConnectionClosed
		}
		if !isNoResponders(r.msg) {
			return parsePubAck(r.msg.Data)
		}
		if attempt == jetstream.DefaultPubRetryAttempts {
			return Result{}, jetstream.ErrNoStreamResponse
		}
		// A stream whose leader is changing has no responder for a moment.
		wait := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return Result{}, ctx.Err()
		case <-timeout:
			wait.Stop()
			return Result{}, context.DeadlineExceeded
		}
	}
}

// parsePubAck reads a stream's acknowledgement of one message.
func parsePubAck(data []byte) (Result, error) {
	if r, ok := fastPubAck(data); ok {
		return r, nil
	}
	var ack struct {
		Error     *jetstream.APIError `json:"error"`
		Stream    string              `json:"stream"`
		Sequence  uint64              `json:"seq"`
		Duplicate bool                `json:"duplicate"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return Result{}, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return Result{}, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return Result{}, jetstream.ErrInvalidJSAck
	}
	return Result{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// fastPubAck reads the form nats-server writes for a stored message,
// {"stream":"S",("domain":"D",)?"seq":N(,"duplicate": true)?}, and
// reports false for anything else.
func fastPubAck(data []byte) (Result, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"stream":"`))
	if !ok {
		return Result{}, false
	}
	i := plainString(rest)
	if i <= 0 {
		return Result{}, false
	}
	rest = rest[i+1:]
	if d, ok := bytes.CutPrefix(rest, []byte(`,"domain":"`)); ok {
		j := plainString(d)
		if j < 0 {
			return Result{}, false
		}
		rest = d[j+1:]
	}
	rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`))
	if !ok {
		return Result{}, false
	}
	var seq uint64
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		seq = seq*10 + uint64(rest[n]-'0')
		n++
	}
	// 19 digits cannot overflow; a longer number is left to the decoder.
	// JSON has no leading zeros.
	if n == 0 || n > 19 || (n > 1 && rest[0] == '0') {
		return Result{}, false
	}
	switch string(rest[n:]) {
	case "}":
		return Result{Sequence: seq}, true
	case `,"duplicate": true}`, `,"duplicate":true}`:
		return Result{Sequence: seq, Duplicate: true}, true
	}
	return Result{}, false
}

// plainString is the index of the quote that ends a JSON string without
// escapes or control characters at the start of b, or -1.
func plainString(b []byte) int {
	for i, c := range b {
		switch {
		case c == '"':
			return i
		case c == '\\' || c < 0x20:
			return -1
		}
	}
	return -1
}
