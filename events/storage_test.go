package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
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
