package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/internal/retry"
)

// listAttempt bounds one attempt to list a bucket.
const listAttempt = 5 * time.Second

// SnapshotBucket is the object store bucket that holds projection snapshots.
const SnapshotBucket = "JP_SNAPSHOTS"

// Blobs is a bucket of named blobs in the NATS object store, chunked so that
// blobs may be far larger than a message.
type Blobs struct {
	os jetstream.ObjectStore
	// sync makes the bucket's writes durable (Log.syncStream).
	sync func() error
}

// Blobs opens (creating if needed) an object store bucket with the log's
// replication.
func (l *Log) Blobs(ctx context.Context, bucket string) (*Blobs, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	os, err := l.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "jetplane " + bucket,
		Replicas:    info.Config.Replicas,
		Storage:     jetstream.FileStorage,
		Compression: true,
	})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	return &Blobs{os: os, sync: func() error { return l.syncStream("OBJ_"+bucket, false) }}, nil
}

// Put stores data under name, replacing what was there.
func (b *Blobs) Put(ctx context.Context, name string, data []byte) error {
	if _, err := b.os.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	if err := b.sync(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return nil
}

// Get returns the blob stored under name, or ErrNotFound.
func (b *Blobs) Get(ctx context.Context, name string) ([]byte, error) {
	data, err := b.os.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("get %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	return data, nil
}

// List returns the names of the bucket's blobs that start with prefix.
//
// The object store lists through a watch whose end is marked by the server;
// when the bucket's stream elects a leader or the server is slow, that mark
// can go missing and the watch would wait forever. So each attempt is
// bounded (listAttempt, growing if the server is merely slow) and retried
// until ctx ends: the projector lists snapshots before it catches up, and
// an unbounded list there kept an instance unready for minutes.
func (b *Blobs) List(ctx context.Context, prefix string) ([]string, error) {
	var infos []*jetstream.ObjectInfo
	err := retry.Do(ctx, retry.Backoff{First: 100 * time.Millisecond, Max: 2 * time.Second}, nil, func(attempt int) error {
		actx, cancel := context.WithTimeout(ctx, listAttempt*time.Duration(min(attempt, 4)))
		defer cancel()
		var err error
		infos, err = b.os.List(actx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			infos, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	var names []string
	for _, info := range infos {
		if strings.HasPrefix(info.Name, prefix) {
			names = append(names, info.Name)
		}
	}
	return names, nil
}

// Delete removes the blob stored under name; a missing one is no error.
func (b *Blobs) Delete(ctx context.Context, name string) error {
	if err := b.os.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return b.sync()
}
