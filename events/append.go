package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// MaxEventBytes bounds one encoded event: an object (at most 1 MiB) plus the
// event's own fields.
const MaxEventBytes = 1<<20 + 64<<10

// MaxBatch is the most events one atomic AppendBatch can hold (the server's
// atomic batch limit).
const MaxBatch = 1000

var (
	// ErrConflict means an append's expected version was not the key's
	// latest: someone else wrote the key since it was read.
	ErrConflict = errors.New("conflict: the object changed since it was read")
	// ErrNotFound means no event matched.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge means an encoded event exceeds MaxEventBytes.
	ErrTooLarge = errors.New("event too large")
	// ErrDuplicate means an atomic batch held an event id the log already
	// stored within the dedupe window: the batch was a retry of one that
	// landed, and nothing new was stored.
	ErrDuplicate = errors.New("batch already stored")
	// ErrStorageFull means the log's server has no room for the event:
	// nothing was written.
	ErrStorageFull = errors.New("the log's storage is full: free disk space where NATS stores the log, or raise its storage limit (jetplane's embedded server takes writes again by itself once there is room; an outside server computes its limit from the free space when it starts, so restart it after freeing space); nothing was written")
	// ErrStorageUnavailable means the log's server cannot write its store
	// (a write to its disk failed, or JetStream is stopped): nothing was
	// written.
	ErrStorageUnavailable = errors.New("the log's server cannot write its store; nothing was written")
)

// storeFailed explains a failed append by the server's store, when the log
// has a way to ask (Config.StoreError) and the store is broken: a full
// disk is ErrStorageFull, any other write failure ErrStorageUnavailable,
// each with the server's words. Otherwise err is returned as it is.
func (l *Log) storeFailed(err error) error {
	if err == nil || l.storeErr == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrStorageFull) {
		return err
	}
	cause := l.storeErr(true)
	if cause == nil {
		return err
	}
	return storeCause(cause)
}

// storeCause is the error of an append that the store's trouble stops.
func storeCause(cause error) error {
	if strings.Contains(strings.ToLower(cause.Error()), "no space left") {
		return fmt.Errorf("%w: %v", ErrStorageFull, cause)
	}
	return fmt.Errorf("%w: %v", ErrStorageUnavailable, cause)
}

// isStorageFullCode reports the server's "insufficient resources" and
// "storage resources exceeded" codes.
func isStorageFullCode(code int) bool {
	return code == codeInsufficientResources || code == codeStorageExceeded
}

const (
	hdrMsgID        = "Nats-Msg-Id"
	hdrExpectSeq    = "Nats-Expected-Last-Subject-Sequence"
	hdrBatchID      = "Nats-Batch-Id"
	hdrBatchSeq     = "Nats-Batch-Sequence"
	hdrBatchCommit  = "Nats-Batch-Commit"
	anyVersionValue = ^uint64(0)
)

// AnyVersion, as an Entry's Expect, appends without a concurrency check.
const AnyVersion = anyVersionValue

// Entry is one event to append. Expect is the resourceVersion the writer
// read: the log sequence of the key's last event, 0 for a key with no events,
// or AnyVersion to skip the check. The event's Id is its dedupe id; an empty
// Id gets a fresh unique one.
type Entry struct {
	Event  *schemas.Event
	Expect uint64
}

// Result is what the log says about one appended entry.
type Result struct {
	Sequence uint64
	// Duplicate is true when the event id was already in the dedupe window:
	// nothing new was stored and Sequence is the original's.
	Duplicate bool
}

func (l *Log) msg(e Entry) (*nats.Msg, error) {
	ev := e.Event
	if ev.GetKey() == nil {
		return nil, errors.New("append: event has no key")
	}
	if ev.Id == "" {
		ev.Id = nuid.Next()
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("append %s: encode: %w", keyTokens(ev.Key), err)
	}
	if len(data) > MaxEventBytes {
		return nil, fmt.Errorf("append %s: %w: %d bytes, limit %d", keyTokens(ev.Key), ErrTooLarge, len(data), MaxEventBytes)
	}
	m := nats.NewMsg(InputSubject(ev.Key))
	m.Data = data
	m.Header.Set(hdrMsgID, ev.Id)
	if e.Expect != AnyVersion {
		// The server applies the stream's subject transform before any
		// check, so this compares against the key's stored subject (with
		// its partition), on single servers and clusters alike. Naming the
		// subject explicitly would store one more header in every event.
		m.Header.Set(hdrExpectSeq, strconv.FormatUint(e.Expect, 10))
	}
	return m, nil
}

// storeBroken is the error an append gets at once, without being sent,
// while the server says it cannot write its store: the server would not
// answer a single append at all, and would refuse a batch as "incomplete".
func (l *Log) storeBroken() error {
	if l.storeErr == nil {
		return nil
	}
	cause := l.storeErr(false)
	if cause == nil {
		return nil
	}
	return storeCause(cause)
}

// Append stores one event and waits for the log to acknowledge it.
func (l *Log) Append(ctx context.Context, e Entry) (Result, error) {
	if err := l.storeBroken(); err != nil {
		return Result{}, fmt.Errorf("append %s: %w", keyTokens(e.Event.Key), err)
	}
	m, err := l.msg(e)
	if err != nil {
		return Result{}, err
	}
	r, err := l.publish(ctx, m)
	if err != nil {
		return Result{}, fmt.Errorf("append %s: %w", keyTokens(e.Event.Key), l.storeFailed(translate(err)))
	}
	if err := l.durable(ctx); err != nil {
		return r, fmt.Errorf("append %s: %w", keyTokens(e.Event.Key), err)
	}
	return r, nil
}

// AppendBatch stores entries atomically: either every entry is stored, in
// order and with contiguous sequences, or none is (a failed concurrency check
// on any entry rejects the whole batch with ErrConflict). At most MaxBatch
// entries.
func (l *Log) AppendBatch(ctx context.Context, entries []Entry) ([]Result, error) {
	switch {
	case len(entries) == 0:
		return nil, nil
	case len(entries) == 1:
		r, err := l.Append(ctx, entries[0])
		return []Result{r}, err
	case len(entries) > MaxBatch:
		return nil, fmt.Errorf("append batch: %d entries, at most %d in one atomic batch", len(entries), MaxBatch)
	}
	if err := l.storeBroken(); err != nil {
		return nil, fmt.Errorf("append batch: %w", err)
	}
	msgs := make([]*nats.Msg, len(entries))
	for i, e := range entries {
		m, err := l.msg(e)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	id := nuid.Next()
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := l.nc.PublishMsg(m); err != nil {
				return nil, fmt.Errorf("append batch: %w", err)
			}
		}
	}
	commit := msgs[len(msgs)-1]
	commit.Header.Set(hdrBatchCommit, "1")
	resp, err := l.nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return nil, fmt.Errorf("append batch: commit: %w", l.storeFailed(err))
	}
	var ack struct {
		Stream   string    `json:"stream"`
		Sequence uint64    `json:"seq"`
		Count    uint64    `json:"count"`
		Error    *apiError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return nil, fmt.Errorf("append batch: bad acknowledgement %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		// A batch whose events the server could not store comes back
		// "incomplete" (code 10176), whatever the reason.
		return nil, fmt.Errorf("append batch: %w", l.storeFailed(ack.Error.err()))
	}
	if ack.Count != uint64(len(entries)) {
		return nil, fmt.Errorf("append batch: log stored %d of %d events", ack.Count, len(entries))
	}
	out := make([]Result, len(entries))
	for i := range out {
		out[i].Sequence = ack.Sequence - uint64(len(entries)-1-i)
	}
	if err := l.durable(ctx); err != nil {
		return out, fmt.Errorf("append batch: %w", err)
	}
	return out, nil
}

// AppendAsync pipelines entries without waiting for each acknowledgement,
// then waits for all of them. Unlike AppendBatch it is not atomic: each entry
// succeeds or fails on its own, reported in errs (nil when all succeeded).
// It is the fast path for writers whose entries are independent, such as a
// bridge relaying watch events.
func (l *Log) AppendAsync(ctx context.Context, entries []Entry) (results []Result, errs []error) {
	results = make([]Result, len(entries))
	errs = make([]error, len(entries))
	msgs := make([]*nats.Msg, len(entries))
	failed := 0
	broken := l.storeBroken()
	for i, e := range entries {
		if broken != nil {
			errs[i] = fmt.Errorf("append %s: %w", keyTokens(e.Event.Key), broken)
			failed++
			continue
		}
		m, err := l.msg(e)
		if err != nil {
			errs[i] = err
			failed++
			continue
		}
		msgs[i] = m
	}
	sent := make([]error, len(entries))
	l.pipeline(ctx, msgs, results, sent)
	for i, err := range sent {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			errs[i] = l.storeFailed(err)
			failed++
		default:
			errs[i] = fmt.Errorf("append %s: %w", keyTokens(entries[i].Event.Key), l.storeFailed(translate(err)))
			failed++
		}
	}
	if failed < len(entries) {
		// One wait covers every entry the server acknowledged.
		if err := l.durable(ctx); err != nil {
			for i := range entries {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("append %s: %w", keyTokens(entries[i].Event.Key), err)
					failed++
				}
			}
		}
	}
	if failed == 0 {
		return results, nil
	}
	return results, errs
}

type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) err() error {
	if isConflictCode(e.ErrCode) {
		return fmt.Errorf("%w (%s)", ErrConflict, e.Description)
	}
	if e.ErrCode == codeAtomicDuplicate {
		return fmt.Errorf("%w (%s)", ErrDuplicate, e.Description)
	}
	if isStorageFullCode(e.ErrCode) {
		return fmt.Errorf("%w (%s, code %d)", ErrStorageFull, e.Description, e.ErrCode)
	}
	return fmt.Errorf("%s (code %d)", e.Description, e.ErrCode)
}

// The server's codes for a store without room: "insufficient resources"
// (its storage limit reached) and "insufficient storage resources
// available" (an account's).
const (
	codeInsufficientResources = 10023
	codeStorageExceeded       = 10047
)

// codeAtomicDuplicate is the server's "atomic publish batch contains
// duplicate message id".
const codeAtomicDuplicate = 10201

func isConflictCode(code int) bool {
	return code == int(jetstream.JSErrCodeStreamWrongLastSequence) ||
		code == int(jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// translate maps JetStream errors to the package's sentinels.
func translate(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		if isConflictCode(int(apiErr.ErrorCode)) {
			return fmt.Errorf("%w (%s)", ErrConflict, apiErr.Description)
		}
		if apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return ErrNotFound
		}
		if isStorageFullCode(int(apiErr.ErrorCode)) {
			return fmt.Errorf("%w (%s, code %d)", ErrStorageFull, apiErr.Description, apiErr.ErrorCode)
		}
	}
	return err
}
