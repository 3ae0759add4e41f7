package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// Names a controller credential (auth.RoleController) works under. A
// controller's name is a DNS-1123 label, so each is one subject token and
// part of a bucket's name as it is.
const (
	// ControllerPrefix starts the subjects controllers send writes on;
	// the instances answer them (ServeControllerWrites).
	ControllerPrefix = "jp.ctl"
	// ControllerBucketPrefix starts each controller's own members bucket:
	// its replicas share its partitions among themselves, apart from the
	// instances and from other controllers.
	ControllerBucketPrefix = "JP_CTL_"
	// ControllerConsumerPrefix starts the names of a controller's
	// partition consumers on the log: ControllerConsumers(name, tag)_p
	// (PartitionConsumer).
	ControllerConsumerPrefix = "jp-ctl-"
)

// ShownConsumer is consumer's name as errors and logs show it: with any
// consumer tag (a part between underscores of 16 characters of
// lower-case base32) cut out, since the tag is what keeps the consumer
// from other credentials and logs may be read by them (a pod's logs).
func ShownConsumer(name string) string {
	parts := strings.Split(name, "_")
	for i, p := range parts {
		if i > 0 && isTag(p) {
			parts[i] = "…"
		}
	}
	return strings.Join(parts, "_")
}

func isTag(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// ControllerConsumers prefixes the names of controller name's partition
// consumers on the log (PartitionConsumer), for a credential with consumer
// tag tag: jp-ctl-NAME_TAG. The tag is random and no outside credential
// may list consumers, so no other credential can name them (decision
// 0122). A credential issued before tags (tag "") has the earlier,
// guessable prefix jp-ctl-NAME. The underscore, which no controller's
// name holds, keeps one controller's names apart from another's.
func ControllerConsumers(name, tag string) string {
	if tag == "" {
		return ControllerConsumerPrefix + name
	}
	return ControllerConsumerPrefix + name + "_" + tag
}

// ControllerSubject is the subject controller name sends its writes on.
func ControllerSubject(name string) string { return ControllerPrefix + "." + name + ".write" }

// ControllerBucket is controller name's members bucket.
func ControllerBucket(name string) string { return ControllerBucketPrefix + name }

// ErrRefused marks a write the instances refused for good (a controller
// writing what its credential does not allow): sending it again changes
// nothing.
var ErrRefused = errors.New("refused")

// Bind returns the log as it stands, creating and changing nothing: for a
// credential that may read the stream but not configure it. It waits,
// retrying, until the stream exists (a controller may start before the
// first instance).
func Bind(ctx context.Context, nc *nats.Conn) (*Log, error) {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(15*time.Second))
	if err != nil {
		return nil, err
	}
	for {
		s, err := js.Stream(ctx, StreamName)
		if err == nil {
			return &Log{nc: nc, js: js, stream: s, partitions: partitionsOf(s.CachedInfo().Config), group: &grouper{}}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for stream %s (is jetplane serve running?): %w (last: %v)", StreamName, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ControllerLog is the log as an out-of-process controller sees it: read
// like any reader's, written only through the instances, which check
// every write against the controller's credential (ServeControllerWrites).
// Its Join uses the controller's own members bucket.
type ControllerLog struct {
	*Log
	name string
}

// OpenController binds controller name's view of the log; nc must be
// connected with name's credential.
func OpenController(ctx context.Context, nc *nats.Conn, name string) (*ControllerLog, error) {
	l, err := Bind(ctx, nc)
	if err != nil {
		return nil, err
	}
	return &ControllerLog{Log: l, name: name}, nil
}

// Name is the controller's name.
func (c *ControllerLog) Name() string { return c.name }

// Join announces instance among the controller's replicas. The
// instances make the controller's bucket (EnsureControllerBucket): its
// credential may use it but not configure it. Join waits for it until
// ctx ends; where nothing makes it (a NATS server whose permissions
// jetplane does not set), it makes it itself.
func (c *ControllerLog) Join(ctx context.Context, instance string, opts MemberOptions) (*Members, error) {
	bucket := ControllerBucket(c.name)
	return c.join(ctx, bucket, instance, opts, func(ctx context.Context) (jetstream.KeyValue, error) {
		// The instances look for new credentials every second: after a
		// few, try making it, briefly (a credential jetplane made is
		// refused, and the server does not answer a refused request).
		tryAt := time.Now().Add(3 * time.Second)
		for {
			kv, err := c.js.KeyValue(ctx, bucket)
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				return kv, err
			}
			if !tryAt.IsZero() && time.Now().After(tryAt) {
				tryAt = time.Time{}
				tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				kv, err := createMembersBucket(tctx, c.js, bucket)
				cancel()
				if err == nil {
					return kv, nil
				}
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("no bucket %s yet: the instances make it for each controller credential (is jetplane serve running, and does it know credential %q?): %w", bucket, c.name, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
}

// EnsureControllerBucket makes controller name's members bucket, as only
// an instance may: a credential that could configure its own bucket's
// stream could make it source other streams (the keys bucket, other
// controllers' buckets) or republish into the log. A bucket made before
// with any other subjects, sources, mirror, republish or transform is
// deleted and made again.
func EnsureControllerBucket(ctx context.Context, js jetstream.JetStream, name string) error {
	bucket := ControllerBucket(name)
	if s, err := js.Stream(ctx, "KV_"+bucket); err == nil {
		if cfg := s.CachedInfo().Config; !plainBucket(cfg, bucket) {
			if err := js.DeleteStream(ctx, "KV_"+bucket); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("controller %s: delete its misconfigured bucket: %w", name, err)
			}
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("controller %s: bucket: %w", name, err)
	}
	if _, err := createMembersBucket(ctx, js, bucket); err != nil {
		return fmt.Errorf("controller %s: bucket: %w", name, err)
	}
	return nil
}

// plainBucket reports whether cfg is a key-value bucket's stream that
// stores its own keys and nothing else, nowhere else.
func plainBucket(cfg jetstream.StreamConfig, bucket string) bool {
	return len(cfg.Subjects) == 1 && cfg.Subjects[0] == "$KV."+bucket+".>" &&
		cfg.Mirror == nil && len(cfg.Sources) == 0 && cfg.RePublish == nil &&
		cfg.SubjectTransform == nil && !cfg.NoAck && !cfg.Sealed
}

// Append sends one write through the instances.
func (c *ControllerLog) Append(ctx context.Context, e Entry) (Result, error) {
	res, errs, err := c.request(ctx, false, []Entry{e})
	if err != nil {
		return Result{}, err
	}
	if errs != nil {
		return res[0], errs[0]
	}
	return res[0], nil
}

// AppendBatch sends entries to be written atomically, as Log.AppendBatch.
func (c *ControllerLog) AppendBatch(ctx context.Context, entries []Entry) ([]Result, error) {
	res, errs, err := c.request(ctx, true, entries)
	if err != nil {
		return nil, err
	}
	if errs != nil {
		return nil, errs[0]
	}
	return res, nil
}

// AppendAsync sends entries to be written each on its own, as
// Log.AppendAsync.
func (c *ControllerLog) AppendAsync(ctx context.Context, entries []Entry) ([]Result, []error) {
	return c.each(ctx, entries)
}

// AppendEach sends entries to be written each with its own outcome; the
// instances commit them together with their other writers' (Log.AppendEach).
func (c *ControllerLog) AppendEach(ctx context.Context, entries []Entry) ([]Result, []error) {
	return c.each(ctx, entries)
}

func (c *ControllerLog) each(ctx context.Context, entries []Entry) ([]Result, []error) {
	res, errs, err := c.request(ctx, false, entries)
	if err != nil {
		errs = make([]error, len(entries))
		for i := range errs {
			errs[i] = err
		}
		return make([]Result, len(entries)), errs
	}
	return res, errs
}

// A write request is a protobuf message of one repeated bytes field (1),
// each an entry: the encoded event (1) and the version expected (2). Its
// header hdrWrite says "atomic" (one batch, one answer) or "each". The
// answer is one repeated bytes field (1) per entry, or a single one for
// an atomic batch that failed: the sequence (1), whether it was a
// duplicate (2), and an error (3) starting with its class.
const (
	hdrWrite      = "Jp-Write"
	writeConflict = "conflict: "
	writeRefused  = "refused: "
)

func (c *ControllerLog) request(ctx context.Context, atomic bool, entries []Entry) ([]Result, []error, error) {
	m := nats.NewMsg(ControllerSubject(c.name))
	m.Header.Set(hdrWrite, map[bool]string{true: "atomic", false: "each"}[atomic])
	for _, e := range entries {
		data, err := proto.Marshal(e.Event)
		if err != nil {
			return nil, nil, err
		}
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, data)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, e.Expect)
		m.Data = protowire.AppendTag(m.Data, 1, protowire.BytesType)
		m.Data = protowire.AppendBytes(m.Data, b)
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, nil, fmt.Errorf("controller write: %w", err)
	}
	if msg, ok := bytes.CutPrefix(resp.Data, []byte("error: ")); ok {
		return nil, nil, writeError(string(msg))
	}
	parts, err := decodeReports(resp.Data)
	if err != nil {
		return nil, nil, fmt.Errorf("controller write: %w", err)
	}
	if atomic && len(parts) == 1 && len(entries) > 1 {
		r, err := decodeWriteResult(parts[0])
		if err == nil && r.err != nil {
			return nil, []error{r.err}, nil
		}
	}
	if len(parts) != len(entries) {
		return nil, nil, fmt.Errorf("controller write: an answer of %d parts to %d entries", len(parts), len(entries))
	}
	res := make([]Result, len(entries))
	var errs []error
	for i, p := range parts {
		r, err := decodeWriteResult(p)
		if err != nil {
			return nil, nil, err
		}
		res[i] = r.Result
		if r.err != nil {
			if errs == nil {
				errs = make([]error, len(entries))
			}
			errs[i] = r.err
		}
	}
	return res, errs, nil
}

func writeError(msg string) error {
	if m, ok := strings.CutPrefix(msg, writeConflict); ok {
		return fmt.Errorf("controller write: %w: %s", ErrConflict, m)
	}
	if m, ok := strings.CutPrefix(msg, writeRefused); ok {
		return fmt.Errorf("controller write: %w: %s", ErrRefused, m)
	}
	return fmt.Errorf("controller write: %s", msg)
}

type writeResult struct {
	Result
	err error
}

func decodeWriteResult(b []byte) (writeResult, error) {
	var r writeResult
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, errors.New("controller write: undecodable answer")
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, errors.New("controller write: undecodable answer")
			}
			r.Sequence, b = v, b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, errors.New("controller write: undecodable answer")
			}
			r.Duplicate, b = v != 0, b[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return r, errors.New("controller write: undecodable answer")
			}
			r.err, b = writeError(string(v)), b[n:]
		default:
			return r, errors.New("controller write: undecodable answer")
		}
	}
	return r, nil
}

func encodeWriteResult(res Result, err error) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, res.Sequence)
	if res.Duplicate {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if err != nil {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, classify(err))
	}
	return b
}

func classify(err error) string {
	switch {
	case errors.Is(err, ErrConflict):
		return writeConflict + err.Error()
	case errors.Is(err, ErrRefused):
		return writeRefused + err.Error()
	}
	return err.Error()
}

// ControllerWrite is one request of a controller: its name (from the
// subject, which its credential alone may publish on), the entries, and
// whether they are to be written atomically.
type ControllerWrite struct {
	Controller string
	Atomic     bool
	Entries    []Entry
}

// ControllerWriteFunc writes a controller's request: for an atomic one,
// every result or one error; otherwise one result and one error (nil when
// written) per entry. An error wrapping ErrRefused is never worth sending
// again; one wrapping ErrConflict makes the controller read again.
type ControllerWriteFunc func(ctx context.Context, w ControllerWrite) ([]Result, []error)

// ServeControllerWrites answers controllers' write requests until ctx
// ends, one instance of a queue group per request, each request on its
// own goroutine so that concurrent ones can be committed together.
func (l *Log) ServeControllerWrites(ctx context.Context, fn ControllerWriteFunc) error {
	sub, err := l.nc.QueueSubscribe(ControllerPrefix+".*.write", "jp-ctl-write", func(m *nats.Msg) {
		go func() {
			name := strings.Split(m.Subject, ".")[2]
			w := ControllerWrite{Controller: name, Atomic: m.Header.Get(hdrWrite) == "atomic"}
			parts, err := decodeReports(m.Data)
			for _, p := range parts {
				if err != nil {
					break
				}
				var e Entry
				e, err = decodeWriteEntry(p)
				w.Entries = append(w.Entries, e)
			}
			if err == nil && len(w.Entries) == 0 {
				err = errors.New("no entries")
			}
			if err == nil && len(w.Entries) > MaxBatch {
				err = fmt.Errorf("%d entries, at most %d in one request", len(w.Entries), MaxBatch)
			}
			if err != nil {
				_ = m.Respond([]byte("error: " + writeRefused + err.Error()))
				return
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res, errs := fn(wctx, w)
			var reply []byte
			if w.Atomic && len(errs) == 1 && len(w.Entries) > 1 {
				reply = protowire.AppendTag(reply, 1, protowire.BytesType)
				reply = protowire.AppendBytes(reply, encodeWriteResult(Result{}, errs[0]))
				_ = m.Respond(reply)
				return
			}
			for i := range w.Entries {
				var err error
				if errs != nil {
					err = errs[i]
				}
				var r Result
				if i < len(res) {
					r = res[i]
				}
				reply = protowire.AppendTag(reply, 1, protowire.BytesType)
				reply = protowire.AppendBytes(reply, encodeWriteResult(r, err))
			}
			_ = m.Respond(reply)
		}()
	})
	if err != nil {
		return fmt.Errorf("serve controller writes: %w", err)
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	return ctx.Err()
}

func decodeWriteEntry(b []byte) (Entry, error) {
	var e Entry
	bad := errors.New("undecodable entry")
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e, bad
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return e, bad
			}
			e.Event = &schemas.Event{}
			if err := proto.Unmarshal(v, e.Event); err != nil {
				return e, fmt.Errorf("entry: %w", err)
			}
			b = b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return e, bad
			}
			e.Expect, b = v, b[n:]
		default:
			return e, bad
		}
	}
	if e.Event == nil || e.Event.GetKey() == nil {
		return e, errors.New("entry without an event or its key")
	}
	return e, nil
}
