package security

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// The node agent's own client code (events.OpenNode) works with a node
// credential and sees only its own node's pods.
func TestNodeAgentWithNodeCredential(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	store, err := a.Log().NodeStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := store.PutWork(ctx, n, "shop", "web-"+n, []byte("pod")); err != nil {
			t.Fatal(err)
		}
	}
	before := fingerprintOf(t, a)

	nc, v := connectAs(t, a, auth.RoleNode, "n1")
	node, err := events.OpenNode(ctx, nc, "n1")
	if err != nil {
		t.Fatalf("open node with its credential: %v", err)
	}
	if err := node.Beat(ctx, []byte("beat")); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	var mu sync.Mutex
	var seen []string
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- node.WatchWork(wctx, func(ns, name string, _ []byte, _ bool) {
			mu.Lock()
			seen = append(seen, ns+"/"+name)
			mu.Unlock()
		})
	}()
	deadline := time.Now().Add(wait)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node saw none of its work")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := node.PublishLog("shop", "web-n1", "main", "stdout", 0, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := node.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "shop/web-n1" {
		t.Fatalf("work seen = %q, want only n1's pod", seen)
	}
	v.mu.Lock()
	errs := v.errs
	v.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("the node agent's own calls were refused: %q", errs)
	}
	unchanged(t, a, before)
}
