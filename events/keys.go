package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KeysBucket holds the wrapped data keys of sealed (encrypted) objects, one
// entry per data key. It lives outside the log on purpose: the log never
// forgets, while a data key destroyed here makes every value it sealed
// unreadable for good (crypto-shredding).
const KeysBucket = "JP_KEYS"

// KeyBucket is the key-value bucket of data keys. Entries are written
// once and never updated; Destroy erases them.
type KeyBucket struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	// sync makes the bucket's writes durable (Log.syncStream).
	sync func(every bool) error
}

// Keys opens (creating) the data key bucket, replicated like the log.
func (l *Log) Keys(ctx context.Context) (*KeyBucket, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	// The bucket's stream is made here rather than by CreateKeyValue,
	// which always denies deleting messages: destroying a data key must
	// overwrite it on disk (secure delete), not only hide it.
	s, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              "KV_" + KeysBucket,
		Description:       "jetplane data keys of sealed objects (wrapped)",
		Subjects:          []string{"$KV." + KeysBucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxMsgs:           -1,
		MaxMsgSize:        -1,
		Discard:           jetstream.DiscardNew,
		AllowRollup:       true,
		AllowDirect:       true,
		Replicas:          info.Config.Replicas,
		Storage:           jetstream.FileStorage,
		Duplicates:        2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("keys: open bucket %s: %w", KeysBucket, err)
	}
	kv, err := l.js.KeyValue(ctx, KeysBucket)
	if err != nil {
		return nil, fmt.Errorf("keys: open bucket %s: %w", KeysBucket, err)
	}
	return &KeyBucket{kv: kv, stream: s, sync: func(every bool) error { return l.syncStream("KV_"+KeysBucket, every) }}, nil
}

// Create stores value under id unless id exists.
func (b *KeyBucket) Create(ctx context.Context, id string, value []byte) error {
	if _, err := b.kv.Create(ctx, id, value); err != nil {
		return fmt.Errorf("keys: create %s: %w", id, err)
	}
	// An event sealed with this key may be fsynced next: the key must
	// last as long.
	if err := b.sync(false); err != nil {
		return fmt.Errorf("keys: create %s: %w", id, err)
	}
	return nil
}

// Get returns the value under id, or ErrNotFound (never stored, or
// destroyed).
func (b *KeyBucket) Get(ctx context.Context, id string) ([]byte, error) {
	e, err := b.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("keys: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("keys: get %s: %w", id, err)
	}
	return e.Value(), nil
}

// Destroy erases every entry whose id starts with prefix + ".": each
// stored message is overwritten on disk (secure delete), then the key is
// purged. It returns how many entries it erased.
func (b *KeyBucket) Destroy(ctx context.Context, prefix string) (int, error) {
	lister, err := b.kv.ListKeysFiltered(ctx, prefix+".>")
	if err != nil {
		return 0, fmt.Errorf("keys: list %s: %w", prefix, err)
	}
	var ids []string
	for id := range lister.Keys() {
		ids = append(ids, id)
	}
	n := 0
	for _, id := range ids {
		m, err := b.stream.GetLastMsgForSubject(ctx, "$KV."+KeysBucket+"."+id)
		if err == nil {
			if err := b.stream.SecureDeleteMsg(ctx, m.Sequence); err != nil {
				return n, fmt.Errorf("keys: erase %s: %w", id, err)
			}
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("keys: erase %s: %w", id, err)
		}
		if err := b.kv.Purge(ctx, id); err != nil {
			return n, fmt.Errorf("keys: purge %s: %w", id, err)
		}
		n++
	}
	if n > 0 {
		// An erased key must stay erased after a crash: the erase
		// rewrote blocks before the newest.
		if err := b.sync(true); err != nil {
			return n, fmt.Errorf("keys: erase %s: %w", prefix, err)
		}
	}
	return n, nil
}

// WatchDestroyed calls fn with the id of every entry destroyed from now on
// (by any instance), until ctx ends: instances that cached an unwrapped
// data key forget it, so destroying a key reaches every instance. It
// returns once the watch is open.
func (b *KeyBucket) WatchDestroyed(ctx context.Context, fn func(id string)) error {
	w, err := b.kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("keys: watch: %w", err)
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil && e.Operation() != jetstream.KeyValuePut {
					fn(e.Key())
				}
			}
		}
	}()
	return nil
}
