package events

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Halt stops m's heartbeat without withdrawing it, as a crash would.
func Halt(m *Members) {
	m.stop()
	<-m.done
}

// faultyKV fails deletes while fail holds an error.
type faultyKV struct {
	jetstream.KeyValue
	fail atomic.Pointer[error]
}

func (f *faultyKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := f.fail.Load(); err != nil {
		return *err
	}
	return f.KeyValue.Delete(ctx, key, opts...)
}

// FailDeletes makes m's deletes from the bucket fail with err until it is
// called with nil. m must be halted (its loop no longer reads m.kv).
func FailDeletes(m *Members, err error) {
	f, ok := m.kv.(*faultyKV)
	if !ok {
		f = &faultyKV{KeyValue: m.kv}
		m.kv = f
	}
	if err == nil {
		f.fail.Store(nil)
	} else {
		f.fail.Store(&err)
	}
}

// Beat makes one heartbeat of m, as its loop would.
func Beat(ctx context.Context, m *Members) error { return m.beat(ctx) }

// LogWithoutStream is a log on nc whose stream was never created: every
// append reaches no responder.
func LogWithoutStream(nc *nats.Conn) *Log {
	return &Log{nc: nc, partitions: 1, group: &grouper{}}
}
