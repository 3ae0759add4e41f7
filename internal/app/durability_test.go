package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
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
			a, stop := apptest.Start(t, cfg, 30*time.Second)
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

			b, _ := apptest.Start(t, cfg, 30*time.Second)
			waitAllReady(t, b.Store(), n)
		})
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
