package events

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotAppendOnly is returned when the log's stream would let someone
// delete or purge events.
var ErrNotAppendOnly = errors.New("the log stream allows deleting or purging events")

// CheckAppendOnly asks the server for the stream's config and fails with
// ErrNotAppendOnly unless it denies both delete and purge. Open sets both
// (and JetStream never lets them be unset again); this check catches an
// outside deployment that did not apply them.
func (l *Log) CheckAppendOnly(ctx context.Context) error {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	if !info.Config.DenyDelete || !info.Config.DenyPurge {
		return fmt.Errorf("stream %s: deny_delete=%t deny_purge=%t: %w; recreate it with both set (jetplane sets them on a stream it creates)",
			StreamName, info.Config.DenyDelete, info.Config.DenyPurge, ErrNotAppendOnly)
	}
	return nil
}
