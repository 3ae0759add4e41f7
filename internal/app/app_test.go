package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

// startApp runs a whole jetplane in-process on a temporary store and
// returns it with a client, once it is ready.
func startApp(tb testing.TB, cfg app.Config) (*app.App, *api.Client) {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.NATSPort = -1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("app stopped with %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("app not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, &api.Client{BaseURL: a.URL()}
}
