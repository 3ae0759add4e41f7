package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// A server out of storage refuses appends with ErrStorageFull, whose
// message says what to do, for single appends and atomic batches alike;
// nothing of a refused batch is stored.
func TestAppendStorageFull(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), JetStreamMaxStore: 256 << 10, NoSigs: true, NoLog: true}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pad, _ := structpb.NewStruct(map[string]any{"pad": strings.Repeat("x", 4000)})
	big := func(i int) events.Entry {
		ev := event(key(fmt.Sprint("k", i)), "")
		ev.Object = nil
		ev.Detail = pad
		return events.Entry{Event: ev, Expect: events.AnyVersion}
	}
	var full error
	for i := 0; i < 200 && full == nil; i++ {
		_, full = l.Append(ctx, big(i))
	}
	if !errors.Is(full, events.ErrStorageFull) || !strings.Contains(full.Error(), "free disk space") {
		t.Fatalf("append to a full store: err = %v, want ErrStorageFull saying what to do", full)
	}
	before, err := l.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := []events.Entry{big(1000), big(1001), big(1002)}
	if _, err := l.AppendBatch(ctx, batch); !errors.Is(err, events.ErrStorageFull) {
		t.Fatalf("atomic batch to a full store: err = %v, want ErrStorageFull", err)
	}
	if after, err := l.Count(ctx); err != nil || after != before {
		t.Fatalf("events after a refused batch: %d (%v), want %d", after, err, before)
	}
}

// While the server says its store cannot be written (Config.StoreError),
// appends fail at once with an error naming the cause, and write nothing;
// once it can, they go through.
func TestAppendsSayWhyTheStoreCannotBeWritten(t *testing.T) {
	var broken atomic.Pointer[error]
	l := testenv.Log(t, events.Config{StoreError: func(bool) error {
		if e := broken.Load(); e != nil {
			return *e
		}
		return nil
	}})
	ctx := context.Background()
	entry := func(name string) events.Entry {
		return events.Entry{Event: event(key(name), ""), Expect: events.AnyVersion}
	}
	full := errors.New("Critical write error: write 1.blk: no space left on device")
	broken.Store(&full)
	if _, err := l.Append(ctx, entry("a")); !errors.Is(err, events.ErrStorageFull) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("append to a full store: %v, want ErrStorageFull with the server's words", err)
	}
	if _, err := l.AppendBatch(ctx, []events.Entry{entry("b"), entry("c")}); !errors.Is(err, events.ErrStorageFull) {
		t.Fatalf("batch to a full store: %v, want ErrStorageFull", err)
	}
	if _, errs := l.AppendAsync(ctx, []events.Entry{entry("d")}); len(errs) != 1 || !errors.Is(errs[0], events.ErrStorageFull) {
		t.Fatalf("async append to a full store: %v, want ErrStorageFull", errs)
	}
	other := errors.New("Critical write error: input/output error")
	broken.Store(&other)
	if _, err := l.Append(ctx, entry("e")); !errors.Is(err, events.ErrStorageUnavailable) || errors.Is(err, events.ErrStorageFull) {
		t.Fatalf("append to a failing store: %v, want ErrStorageUnavailable", err)
	}
	if n, err := l.Count(ctx); err != nil || n != 0 {
		t.Fatalf("events stored while the store was broken: %d (%v)", n, err)
	}
	broken.Store(nil)
	if _, err := l.AppendBatch(ctx, []events.Entry{entry("f"), entry("g")}); err != nil {
		t.Fatalf("batch once the store mended: %v", err)
	}
}
