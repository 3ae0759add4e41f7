package api_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
)

// A client sending requests concurrently keeps its connections open and
// uses them again: a connection per request costs the server and the
// client more than many requests do (a single-object apply is one).
func TestClientReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Answers take a moment, so that every worker has a request in
		// flight at once, as against a server that writes.
		time.Sleep(2 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		// A JSON answer ends with a newline, as the API's encoder writes it.
		_, _ = w.Write([]byte("{\"results\":[]}\n"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := &api.Client{BaseURL: srv.URL}
	const workers, each = 16, 100
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := c.ApplyBrief(context.Background(), "test", []byte("{}"), ""); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// A worker's connection goes back to the pool just after its answer is
	// read, so its next request may now and then dial a new one.
	if n := conns.Load(); n > workers+4 {
		t.Fatalf("%d connections for %d requests from %d workers; want about one per worker", n, workers*each, workers)
	}
}
