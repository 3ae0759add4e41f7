package kubeapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
)

// Log is what the server reads from the log directly: the keys written
// after a sequence the projection's watch window no longer holds, so that
// a watch resumes across a restart or on another instance.
type Log interface {
	Read(ctx context.Context, opts events.ReadOptions, fn events.Handler) error
}

var _ Log = (*events.Log)(nil)

// MaxResume bounds how many events a watch may resume over from the log;
// a client further behind relists (410 Gone), as from a compacted etcd.
var MaxResume uint64 = 1 << 20

var errEnough = errors.New("read far enough")

// resumed is one key changed between a watch's resourceVersion and the
// point its live stream starts.
type resumed struct {
	key projections.Key
	seq uint64
}

// changedSince returns the keys of kind (in namespace, when not empty)
// written after sequence from up to sequence to, each with the sequence
// of its last event there, oldest first. It reads the subjects the log
// stores, filtered by kind on the server.
func changedSince(ctx context.Context, log Log, kind, namespace string, from, to uint64) ([]resumed, error) {
	if to-from > MaxResume {
		return nil, fmt.Errorf("%w: %d events after %d; list again", projections.ErrGone, to-from, from)
	}
	last := map[projections.Key]uint64{}
	filter := events.StoredPrefix + ".*." + events.EscapeToken(kind) + ".>"
	err := log.Read(ctx, events.ReadOptions{From: from + 1, Filter: filter}, func(m events.Message) error {
		if m.Sequence > to {
			return errEnough
		}
		_, k, err := events.ParseSubject(m.Subject)
		if err != nil {
			return err
		}
		if k.GetKind() == kind && (namespace == "" || k.GetNamespace() == namespace) {
			last[projections.KeyOf(k)] = m.Sequence
		}
		if m.Sequence == to {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	out := make([]resumed, 0, len(last))
	for k, seq := range last {
		out = append(out, resumed{key: k, seq: seq})
	}
	slices.SortFunc(out, func(a, b resumed) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}
