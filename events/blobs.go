package events

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotBucket is the object store bucket that holds projection snapshots.
const SnapshotBucket = "JP_SNAPSHOTS"

// Blobs is a bucket of named blobs in the NATS object store, chunked so that
// blobs may be far larger than a message.
type Blobs struct {
	os jetstream.ObjectStore
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
	return &Blobs{os: os}, nil
}

// Put stores data under name, replacing what was there.
func (b *Blobs) Put(ctx context.Context, name string, data []byte) error {
	if _, err := b.os.PutBytes(ctx, name, data); err != nil {
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
func (b *Blobs) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := b.os.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
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
	return nil
}
