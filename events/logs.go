package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// LogLine is one chunk of a container's output.
type LogLine struct {
	Container string
	Stream    string // stdout or stderr
	Restart   int    // the container's restart count when it wrote this
	Time      time.Time
	Data      []byte
	// Seq is the chunk's sequence in JP_LOGS (LogQuery.After).
	Seq uint64
}

// LogQuery selects a pod's logs.
type LogQuery struct {
	// Node is the node the pod is bound to: only what that node's agent
	// published is read. Empty reads nothing (the pod never ran).
	Node           string
	Namespace, Pod string
	// Container selects one container; empty reads all.
	Container string
	// Since skips lines older than this.
	Since time.Time
	// Follow keeps reading new lines until ctx ends.
	Follow bool
	// Last, above zero, starts at the newest Last chunks, found by
	// sequence from the end of the stream: what lies before them is never
	// read.
	Last int
	// After starts after this JP_LOGS sequence (a follow going on from a
	// read).
	After uint64
}

func (q LogQuery) filter() string {
	c := "*"
	if q.Container != "" {
		c = EscapeToken(q.Container)
	}
	return LogsPrefix + "." + EscapeToken(q.Node) + "." + EscapeToken(q.Namespace) + "." + EscapeToken(q.Pod) + "." + c
}

// logFetch bounds one fetch of a read: a read holds at most this many
// chunks (each at most LogChunkBytes) in memory at once.
const logFetch = 64

// NewestLog returns the newest chunk of each container q selects (its
// Data left out), oldest first; none when nothing is stored.
func (s *NodeStore) NewestLog(ctx context.Context, q LogQuery) ([]LogLine, error) {
	if q.Node == "" {
		return nil, nil
	}
	info, err := s.logs.Info(ctx, jetstream.WithSubjectFilter(q.filter()))
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	var out []LogLine
	for _, subj := range slices.Sorted(maps.Keys(info.State.Subjects)) {
		m, err := s.logs.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // gone with its age
		}
		if err != nil {
			return nil, fmt.Errorf("logs: %w", err)
		}
		l := logLine(m.Subject, m.Header, m.Time, m.Sequence)
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b LogLine) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

func logLine(subject string, h nats.Header, t time.Time, seq uint64) LogLine {
	line := LogLine{Stream: h.Get(hdrLogStream), Time: t, Seq: seq}
	fmt.Sscan(h.Get(hdrLogRestart), &line.Restart)
	if tok := strings.Split(subject, "."); len(tok) == 6 {
		line.Container, _ = UnescapeToken(tok[5])
	}
	return line
}

// ReadLogs calls fn with each stored chunk of q in order; without Follow
// it returns once it reached the newest. It holds at most logFetch chunks
// at a time, whatever the log's length.
func (s *NodeStore) ReadLogs(ctx context.Context, q LogQuery, fn func(LogLine) error) error {
	if q.Node == "" {
		if q.Follow {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	filter := q.filter()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !q.Since.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &q.Since
	}
	if q.After > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = q.After + 1
		cfg.OptStartTime = nil
	}
	// An empty selection never delivers; find out first.
	if !q.Follow || q.Last > 0 {
		info, err := s.logs.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		var total uint64
		for _, n := range info.State.Subjects {
			total += n
		}
		if total == 0 && !q.Follow {
			return nil
		}
		if q.Last > 0 && total > uint64(q.Last) {
			start, err := s.startOfLast(ctx, filter, q.Last, max(info.State.FirstSeq, q.After+1), info.State.LastSeq)
			if err != nil {
				return err
			}
			// A start time wins: its sequence is not known here.
			if cfg.DeliverPolicy != jetstream.DeliverByStartTimePolicy && start > cfg.OptStartSeq {
				cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
				cfg.OptStartSeq = start
				cfg.OptStartTime = nil
			}
		}
	}
	cons, err := s.logs.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	for {
		batch, err := cons.Fetch(logFetch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("logs: %w", err)
			}
			line := logLine(m.Subject(), m.Headers(), meta.Timestamp, meta.Sequence.Stream)
			line.Data = m.Data()
			if err := fn(line); err != nil {
				return err
			}
			if !q.Follow && meta.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("logs: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if got == 0 && !q.Follow {
			return nil
		}
	}
}

// startOfLast finds the greatest stream sequence in [lo, hi] from which
// filter still selects at least n chunks (at least n are known to lie in
// [lo, hi]), by a search over sequences from the end:
// each probe is a consumer the server counts pending messages for, so no
// chunk is read.
func (s *NodeStore) startOfLast(ctx context.Context, filter string, n int, lo, hi uint64) (uint64, error) {
	pending := func(seq uint64) (uint64, error) {
		name := "jp-logs-probe-" + nuid.Next()
		c, err := s.js.CreateConsumer(ctx, LogsStream, jetstream.ConsumerConfig{
			Name: name, FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq,
			MemoryStorage: true, Replicas: 1, InactiveThreshold: 10 * time.Second,
		})
		if err != nil {
			return 0, fmt.Errorf("logs: %w", err)
		}
		np := c.CachedInfo().NumPending
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, LogsStream, name)
		return np, nil
	}
	// Gallop back from the end, then bisect: the probes stay near the
	// end of the stream, whose blocks the read loads anyway.
	top := hi // pending(top+1) < n
	for w := uint64(n); ; w *= 2 {
		if hi < lo+w {
			break // lo itself: pending(lo) >= n is given
		}
		np, err := pending(hi - w + 1)
		if err != nil {
			return 0, err
		}
		if np >= uint64(n) {
			lo = hi - w + 1
			break
		}
		top = hi - w
	}
	// Invariant: pending(lo) >= n, pending(top+1) < n.
	hi = top
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		np, err := pending(mid)
		if err != nil {
			return 0, err
		}
		if np >= uint64(n) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}
