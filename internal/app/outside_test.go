package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
)

// TestOutsideNATS runs jetplane against a NATS server it did not start, by
// URL, as a deployment on a NATS cluster does, and checks the stream it
// created there carries the configured partitions.
func TestOutsideNATS(t *testing.T) {
	srv, nc := testenv.NATS(t)
	a, c := startApp(t, app.Config{NATS: events.ConnectOptions{URLs: srv.ClientURL(), CredsFile: srv.Creds().InstanceCreds(), Name: "jetplane-test"}, Log: events.Config{Partitions: 4}})
	ctx := context.Background()
	if _, err := c.Apply(ctx, "x.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n"), ""); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Log().Count(ctx); err != nil || n != 1 {
		t.Fatalf("log count = %d, %v; want 1", n, err)
	}
	// The events are in the outside server's stream.
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := l.Count(ctx); n != 1 || l.Partitions() != 4 {
		t.Fatalf("outside stream holds %d events in %d partitions; want 1 in 4", n, l.Partitions())
	}
}

func TestConnectErrors(t *testing.T) {
	tests := []struct {
		name string
		opts events.ConnectOptions
		want string
	}{
		{"no url", events.ConnectOptions{}, "nats url: empty"},
		{"cert without key", events.ConnectOptions{URLs: "nats://127.0.0.1:1", CertFile: "c.pem"}, "both a cert file and a key file"},
		{"nothing listening", events.ConnectOptions{URLs: "nats://127.0.0.1:1"}, "connect to nats nats://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := events.Connect(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
