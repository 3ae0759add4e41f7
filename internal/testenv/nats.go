package testenv

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
)

// NATS starts an embedded NATS server with JetStream on a free loopback port
// and a temporary store, and returns an in-process connection to it.
func NATS(tb testing.TB) (*embedded.Server, *nats.Conn) {
	tb.Helper()
	return NATSAt(tb, tb.TempDir())
}

// NATSAt is NATS on a given store directory, to restart a server on the
// same data.
func NATSAt(tb testing.TB, dir string) (*embedded.Server, *nats.Conn) {
	tb.Helper()
	return NATSWith(tb, embedded.Config{StoreDir: dir})
}

// NATSWith starts a server with cfg; an empty StoreDir is a temporary one,
// and the port is always a free one.
func NATSWith(tb testing.TB, cfg embedded.Config) (*embedded.Server, *nats.Conn) {
	tb.Helper()
	if cfg.StoreDir == "" {
		cfg.StoreDir = tb.TempDir()
	}
	cfg.Port = -1
	srv, err := embedded.Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := srv.Connect(tb.Name())
	if err != nil {
		srv.Shutdown()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		nc.Close()
		srv.Shutdown()
	})
	return srv, nc
}

// Log starts NATS and opens the event log on it.
func Log(tb testing.TB, cfg events.Config) *events.Log {
	tb.Helper()
	_, nc := NATS(tb)
	l, err := events.Open(context.Background(), nc, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
