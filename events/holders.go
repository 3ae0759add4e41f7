package events

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// PartitionHolders reads, without joining, which instance holds each
// partition's claim in the MembersBucket (partitions nobody holds are
// absent). It is for display: a claim may change right after.
func (l *Log) PartitionHolders(ctx context.Context) (map[int]string, error) {
	kv, err := l.js.KeyValue(ctx, MembersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return map[int]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("partition holders: %w", err)
	}
	out := map[int]string{}
	for p := range l.partitions {
		e, err := kv.Get(ctx, claimKey(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("partition holders: claim %d: %w", p, err)
		}
		out[p] = strings.TrimSpace(string(e.Value()))
	}
	return out, nil
}
