package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// Message is one stored event, not yet decoded: readers decode it in the
// form they need (Event, or Record for folding).
type Message struct {
	// Data is the stored payload, the message's own copy: a record decoded
	// from it shares its memory, so it must not be modified.
	Data     []byte
	Sequence uint64
	// Subject is the stored subject; decoding checks that the event's key
	// is the one its subject names.
	Subject string
	// Pending is how many events matching the read were stored after this
	// one and not yet delivered; 0 means the reader is caught up.
	Pending uint64
}

// Event decodes the whole event.
func (m Message) Event() (*schemas.Event, error) {
	ev, err := Decode(m.Data, m.Sequence)
	if err != nil {
		return nil, err
	}
	return ev, m.checkKey(ev.Key)
}

// Record decodes the event leaving the object's spec encoded.
func (m Message) Record() (*schemas.EventRecord, error) {
	ev, err := DecodeRecord(m.Data, m.Sequence)
	if err != nil {
		return nil, err
	}
	return ev, m.checkKey(ev.Key)
}

// ErrKeyMismatch means an event's payload names another key than the
// subject it was stored under. jetplane never writes one; an outside
// publisher could, to change a key while bypassing its concurrency check,
// so readers refuse it.
var ErrKeyMismatch = errors.New("event key does not match its subject")

func (m Message) checkKey(k *schemas.ObjectKey) error {
	if m.Subject == "" {
		return nil
	}
	want := keyTokens(k)
	s := m.Subject
	if len(s) <= len(want) || s[len(s)-len(want)-1] != '.' || s[len(s)-len(want):] != want || !strings.HasPrefix(s, StoredPrefix+".") {
		return fmt.Errorf("event %d: %w: payload names %s, subject is %s", m.Sequence, ErrKeyMismatch, want, s)
	}
	return nil
}

// Handler receives messages in log order. Returning an error stops the read
// and is returned by it.
type Handler func(m Message) error

// ReadOptions narrows a read.
type ReadOptions struct {
	// From is the first sequence to read; 0 or 1 reads from the start.
	From uint64
	// Filter is a stored-subject filter (KeyFilter, PartitionFilter); empty
	// reads every event.
	Filter string
	// Follow keeps reading new events until the context ends. Without it the
	// read stops at the last event that matched when it began.
	Follow bool
	// BufferBytes, above zero, bounds what the read pulls ahead of fn to
	// about this many bytes (a few batches of it), for reads of large
	// events that serve a request; zero pulls ahead by count, for replay.
	BufferBytes int
}

// Read delivers events to fn in log order.
func (l *Log) Read(ctx context.Context, opts ReadOptions, fn Handler) error {
	cfg := jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if opts.From > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.From
	}
	if opts.Filter != "" {
		cfg.FilterSubjects = []string{opts.Filter}
	}
	// A read outlives leader elections: it goes on from where it was on a
	// new consumer within about a second of the log having a leader again.
	// Heartbeats every 1.5 s tell it that its server died.
	var ahead jetstream.PullMessagesOpt = jetstream.PullMaxMessages(4096)
	if opts.BufferBytes > 0 {
		ahead = jetstream.PullMaxBytes(opts.BufferBytes)
	}
	t, err := openTail(ctx, l.js, StreamName, cfg, 2*time.Second,
		ahead, jetstream.PullExpiry(6*time.Second), jetstream.PullHeartbeat(1500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer t.Stop()
	if !opts.Follow && t.pending == 0 {
		return nil
	}

	// Two stages overlap: a goroutine pulls messages in batches while the
	// caller's goroutine runs fn (which decodes and folds) on the previous
	// batch.
	batches := make(chan rawBatch, 4)
	pullErr := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		defer close(batches)
		pullErr <- pull(t, opts.Follow, opts.BufferBytes, batches, quit)
	}()
	for b := range batches {
		for _, m := range b {
			if err := fn(m); err != nil {
				return err
			}
		}
	}
	err = <-pullErr
	if err != nil && ctx.Err() != nil {
		if opts.Follow {
			return ctx.Err()
		}
		return fmt.Errorf("read log: %w", ctx.Err())
	}
	return err
}

// rawBatch is a run of messages pulled from the log, not yet decoded.
type rawBatch []Message

const pullBatch = 512

// minPullBatch is the capacity a batch starts from after a small one.
const minPullBatch = 8

// pull moves messages from t into batches until the log's end (unless
// follow), an error, or quit. A batch is handed over when full or when no
// more messages are waiting, so a follower sees each event at once.
func pull(t *tail, follow bool, maxBytes int, out chan<- rawBatch, quit <-chan struct{}) error {
	b := make(rawBatch, 0, pullBatch)
	size := 0
	for {
		msg, meta, err := t.Next()
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		b = append(b, Message{Data: msg.Data(), Sequence: meta.Sequence.Stream, Pending: meta.NumPending, Subject: msg.Subject()})
		size += len(msg.Data())
		end := !follow && meta.NumPending == 0
		if len(b) == pullBatch || meta.NumPending == 0 || (maxBytes > 0 && size >= maxBytes) {
			size = 0
			sent := len(b)
			select {
			case out <- b:
			case <-quit:
				return nil
			}
			// Sized by the last batch: a follower that is caught up hands
			// over one message at a time, and a batch of pullBatch for each
			// (28 KiB, zeroed and scanned) was most of what a burst of
			// writes allocated; catching up, batches grow back by doubling.
			b = make(rawBatch, 0, min(pullBatch, max(minPullBatch, 2*sent)))
		}
		if end {
			return nil
		}
	}
}

// DecodeRecord parses an event payload as stored in the log, leaving the
// object's spec encoded. seq is the log sequence it was stored at. The
// record shares memory with data (its strings and spec are not copied), so
// data must not be modified afterwards.
func DecodeRecord(data []byte, seq uint64) (*schemas.EventRecord, error) {
	ev, ok := fastRecord(data)
	if !ok {
		ev = new(schemas.EventRecord)
		if err := proto.Unmarshal(data, ev); err != nil {
			return nil, fmt.Errorf("decode event %d: %w", seq, err)
		}
	}
	if ev.GetKey() == nil {
		return nil, fmt.Errorf("decode event %d: no key", seq)
	}
	ev.Sequence = seq
	return ev, nil
}

// Decode parses an event payload as stored in the log. seq is the log
// sequence it was stored at.
func Decode(data []byte, seq uint64) (*schemas.Event, error) {
	ev := new(schemas.Event)
	if err := decodeInto(ev, data, seq); err != nil {
		return nil, err
	}
	ev.Sequence = seq
	return ev, nil
}

// decodeInto unmarshals either form of an event and checks it has a key.
func decodeInto(ev interface {
	proto.Message
	GetKey() *schemas.ObjectKey
}, data []byte, seq uint64) error {
	if err := proto.Unmarshal(data, ev); err != nil {
		return fmt.Errorf("decode event %d: %w", seq, err)
	}
	if ev.GetKey() == nil {
		return fmt.Errorf("decode event %d: no key", seq)
	}
	return nil
}

// errPageFull ends a paged read.
var errPageFull = errors.New("page full")

// HistoryPage returns key's events after sequence after, oldest first: at
// most limit of them (0: no bound), and no more once they hold maxBytes
// encoded (at least one). more reports whether events may remain. The read
// holds about maxBytes at a time, whatever the key's history weighs.
func (l *Log) HistoryPage(ctx context.Context, key *schemas.ObjectKey, after uint64, limit, maxBytes int) (evs []*schemas.Event, more bool, err error) {
	size := 0
	err = l.Read(ctx, ReadOptions{From: after + 1, Filter: KeyFilter(key), BufferBytes: max(maxBytes, 1<<20)}, func(m Message) error {
		if (limit > 0 && len(evs) >= limit) || (maxBytes > 0 && len(evs) > 0 && size+len(m.Data) > maxBytes) {
			more = true
			return errPageFull
		}
		ev, err := m.Event()
		if errors.Is(err, ErrKeyMismatch) {
			return nil // a forged event is not this key's history
		}
		if err != nil {
			return err
		}
		evs, size = append(evs, ev), size+len(m.Data)
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	return evs, more, err
}

// LastEvents returns key's last n events, oldest first, holding about n
// events at a time.
func (l *Log) LastEvents(ctx context.Context, key *schemas.ObjectKey, n int) ([]*schemas.Event, error) {
	ring := make([]Message, 0, n)
	err := l.Read(ctx, ReadOptions{Filter: KeyFilter(key), BufferBytes: 1 << 20}, func(m Message) error {
		if len(ring) == n {
			ring = append(ring[:0], ring[1:]...)
		}
		ring = append(ring, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*schemas.Event, 0, len(ring))
	for _, m := range ring {
		ev, err := m.Event()
		if errors.Is(err, ErrKeyMismatch) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// History returns every event of one key, oldest first. Events whose
// payload names another key (see ErrKeyMismatch) are left out.
func (l *Log) History(ctx context.Context, key *schemas.ObjectKey) ([]*schemas.Event, error) {
	var out []*schemas.Event
	err := l.Read(ctx, ReadOptions{Filter: KeyFilter(key)}, func(m Message) error {
		ev, err := m.Event()
		if errors.Is(err, ErrKeyMismatch) {
			return nil // a forged event is not this key's history
		}
		if err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	return out, err
}

// KeyVersion is the sequence of key k's last event, 0 if it has none. It
// answers for keys that left current state too (a finalized key's events
// stay in the log), with one direct lookup by stored subject.
func (l *Log) KeyVersion(ctx context.Context, k *schemas.ObjectKey) (uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, StoredSubject(k, l.partitions))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last event of %s: %w", keyTokens(k), err)
	}
	return m.Sequence, nil
}

// SequenceAt is the sequence of the last event stored at or before t (0 if
// none was).
func (l *Log) SequenceAt(ctx context.Context, t time.Time) (uint64, error) {
	// At or after the newest event: the newest. Asked of the server, a
	// time past the year 2262 overflows its nanoseconds and reads as
	// before the first event.
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	if !t.Before(info.State.LastTime) {
		return info.State.LastSeq, nil
	}
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		// The server's start time is inclusive; everything stored at t
		// belongs to the state at t.
		OptStartTime: ptr(t.Add(time.Nanosecond)),
		HeadersOnly:  true,
	})
	if err != nil {
		return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	if cons.CachedInfo().NumPending == 0 {
		return l.LastSequence(ctx)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		return 0, err
	}
	return meta.Sequence.Stream - 1, nil
}

func ptr[T any](v T) *T { return &v }
