// Package integritytest writes real logs for the integrity tests: an
// embedded NATS server on a directory, events appended through the log,
// and the server stopped, so that the tests damage real block files.
package integritytest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/schemas"
)

// Event is a small Applied event of a ConfigMap named cm-<i>.
func Event(i int) *schemas.Event { return PaddedEvent(i, 0) }

// PaddedEvent is Event with pad more bytes of data.
func PaddedEvent(i, pad int) *schemas.Event {
	spec, _ := structpb.NewStruct(map[string]any{"LOG_LEVEL": "info", "replicas": float64(3), "i": float64(i), "pad": strings.Repeat("p", pad)})
	k := &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "audit", Name: fmt.Sprintf("cm-%d", i)}
	return &schemas.Event{
		Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k, Actor: "user/audit", Time: timestamppb.Now(),
		Object: &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Spec: spec, Metadata: &schemas.ObjectMeta{
			Name: k.Name, Namespace: k.Namespace, Generation: 1,
		}},
	}
}

// Fill starts an embedded server on dir, appends n events from offset
// first on, and stops the server.
func Fill(tb testing.TB, dir string, first, n int) { FillPadded(tb, dir, first, n, 0) }

// FillPadded is Fill with events of pad more bytes (the server's block
// files hold 8 MiB each: large events give a test several files).
func FillPadded(tb testing.TB, dir string, first, n, pad int) {
	tb.Helper()
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		tb.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("fill")
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	for start := 0; start < n; start += events.MaxBatch {
		entries := make([]events.Entry, min(events.MaxBatch, n-start))
		for j := range entries {
			entries[j] = events.Entry{Event: PaddedEvent(first+start+j, pad), Expect: events.AnyVersion}
		}
		if _, errs := l.AppendAsync(ctx, entries); errs != nil {
			tb.Fatal(errs)
		}
	}
}
