package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ChartBucket is the object store bucket that holds packaged Helm charts
// pushed with `jetplane chart push`.
const ChartBucket = "JP_CHARTS"

// ErrExists means a chart version is already stored with other content:
// a pushed version never changes (a release's revision names it, and
// rollback must find the same chart).
var ErrExists = errors.New("already exists")

// Charts stores packaged charts by name and version.
type Charts struct {
	b *Blobs
}

// Charts opens (creating if needed) the chart bucket.
func (l *Log) Charts(ctx context.Context) (*Charts, error) {
	b, err := l.Blobs(ctx, ChartBucket)
	if err != nil {
		return nil, err
	}
	return &Charts{b: b}, nil
}

func chartObject(name, version string) string { return name + ":" + version }

// Put stores a packaged chart as name:version. Pushing the same bytes
// again is a no-op; different bytes under a stored version are ErrExists.
func (c *Charts) Put(ctx context.Context, name, version string, archive []byte) error {
	cur, err := c.b.Get(ctx, chartObject(name, version))
	switch {
	case err == nil && bytes.Equal(cur, archive):
		return nil
	case err == nil:
		return fmt.Errorf("chart %s:%s: %w with other content; push a new version", name, version, ErrExists)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return c.b.Put(ctx, chartObject(name, version), archive)
}

// Get returns the chart pushed as name:version, or ErrNotFound.
func (c *Charts) Get(ctx context.Context, name, version string) ([]byte, error) {
	return c.b.Get(ctx, chartObject(name, version))
}
