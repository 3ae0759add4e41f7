package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
)

// With --sync=always on a standalone embedded server the log makes its
// writes durable itself, in fsyncs shared by concurrent writers
// (decision 0083): single-object applies and the statuses that answer
// them all wait for one, every object is there after a restart, and the
// server's own per-write fsyncs (ServerSync) still work the same.
func TestSyncAlwaysFsyncsInTheLog(t *testing.T) {
	for _, c := range []struct {
		name       string
		serverSync bool
	}{{"log fsyncs", false}, {"server fsyncs", true}} {
		t.Run(c.name, func(t *testing.T) {
			const n, inFlight = 40, 8
			dir := t.TempDir()
			cfg := app.Config{DataDir: dir, SyncAlways: true, ServerSync: c.serverSync,
				Reconcilers: []reconcilers.Reconciler{benchReconciler()}, Queue: queue.Config{MaxRunning: 4}}
			a, stop := runStoppable(t, cfg)
			cl := &api.Client{BaseURL: a.URL()}
			var wg sync.WaitGroup
			next := make(chan int)
			for range inFlight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						if _, err := cl.ApplyBrief(context.Background(), "test", benchDocs(i, i+1, "1"), ""); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			for i := range n {
				next <- i
			}
			close(next)
			wg.Wait()
			waitAllReady(t, a.Store(), n)
			syncs, waits := a.Log().Syncs()
			switch {
			case c.serverSync && syncs != 0:
				t.Fatalf("the log made %d fsyncs with the server making them", syncs)
			case !c.serverSync && (syncs == 0 || waits <= n):
				// Each apply waits, and so does each write of statuses.
				t.Fatalf("%d fsyncs for %d waits; want more than the %d applies' waits", syncs, waits, n)
			}
			stop()

			b, _ := runStoppable(t, cfg)
			waitAllReady(t, b.Store(), n)
		})
	}
}

// runStoppable starts an app with cfg (on cfg.DataDir) and returns it
// with a function that stops it and waits; the test's cleanup stops it
// too.
func runStoppable(t *testing.T, cfg app.Config) (*app.App, func()) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.NATSPort = -1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("app stopped with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("app did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("app not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllReady waits until n Bench objects are Ready in st.
func waitAllReady(t *testing.T, st *projections.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		objs, _ := st.List(projections.Query{Kind: "Bench"})
		ready := 0
		for _, o := range objs {
			if reconcilers.IsReady(o) {
				ready++
			}
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d objects Ready after 60s", ready, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
