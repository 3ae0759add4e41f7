package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/internal/testenv"
)

// stoppableApp runs jetplane until stop is called.
func stoppableApp(t *testing.T, cfg app.Config) (*app.App, func()) {
	t.Helper()
	return apptest.Start(t, cfg, 30*time.Second)
}

// requests counts a client's lists and watches.
type requests struct {
	next          http.RoundTripper
	lists         atomic.Int64
	watches       atomic.Int64
	watchesFromRV atomic.Int64
	lastWatch     atomic.Int64 // unix nanoseconds
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		// A streaming list (WatchList) is a list too, whose stream goes
		// on as the watch.
		r.lists.Add(1)
		r.lastWatch.Store(time.Now().UnixNano())
	case q.Get("watch") == "true":
		r.watches.Add(1)
		r.lastWatch.Store(time.Now().UnixNano())
		if rv := q.Get("resourceVersion"); rv != "" && rv != "0" {
			r.watchesFromRV.Add(1)
		}
	case req.Method == http.MethodGet:
		r.lists.Add(1)
	}
	return r.next.RoundTrip(req)
}

// TestInformerResumesAfterRestart lists and watches 10,000 ConfigMaps with
// a client-go informer, restarts jetplane on the same log, and checks
// that the informer goes on from its resourceVersion: it sees the changes
// made while it was away, and it never lists again.
func TestInformerResumesAfterRestart(t *testing.T) {
	const n = 10000
	// client-go's defaults: a streaming list (WatchListClient), whose
	// stream goes on as the informer's watch.
	dir := t.TempDir()
	// The restarted instance listens where the first did.
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	a, stop := stoppableApp(t, app.Config{DataDir: dir, Listen: listen})
	c := &api.Client{BaseURL: a.URL()}
	for i := 0; i < n; i += events.MaxBatch {
		var b strings.Builder
		for j := i; j < min(n, i+events.MaxBatch); j++ {
			fmt.Fprintf(&b, "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-%05d, namespace: load}, data: {i: \"%d\"}}\n", j, j)
		}
		if _, err := c.ApplyBrief(context.Background(), "load", []byte(b.String()), ""); err != nil {
			t.Fatal(err)
		}
	}

	counter := &requests{}
	cfg := &rest.Config{
		Host: a.URL(), QPS: 1000, Burst: 1000,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter },
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("load"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	var mu sync.Mutex
	seen := map[string]string{}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			mu.Lock()
			seen[o.(*corev1.ConfigMap).Name] = o.(*corev1.ConfigMap).Data["i"]
			mu.Unlock()
		},
		UpdateFunc: func(_, o any) {
			mu.Lock()
			seen[o.(*corev1.ConfigMap).Name] = o.(*corev1.ConfigMap).Data["i"]
			mu.Unlock()
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			mu.Lock()
			delete(seen, o.(*corev1.ConfigMap).Name)
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	factory.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync within 2 minutes")
	}
	t.Logf("informer synced %d objects in %s", len(inf.GetStore().ListKeys()), time.Since(start).Round(time.Millisecond))
	if got := len(inf.GetStore().ListKeys()); got != n {
		t.Fatalf("informer holds %d objects, want %d", got, n)
	}
	// client-go lists again after any watch that ends within a second
	// of its start (for a streaming list: of its initial events' end) with
	// no event, as a restart right now would end this one, against
	// kube-apiserver too: wait until the watch has held for two seconds
	// since then, then count.
	synced := time.Now()
	settle := synced.Add(60 * time.Second)
	for time.Since(synced) < 2*time.Second || time.Since(time.Unix(0, counter.lastWatch.Load())) < 2*time.Second {
		if time.Now().After(settle) {
			t.Fatal("no watch held for two seconds within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	lists := counter.lists.Load()
	t.Logf("before the restart: %d list requests, %d watches", lists, counter.watches.Load())

	// Restart on the same log; change things while the informer is away.
	stop()
	a2, _ := stoppableApp(t, app.Config{DataDir: dir, Listen: listen})
	c2 := &api.Client{BaseURL: a2.URL()}
	if _, err := c2.ApplyBrief(context.Background(), "t", []byte("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-00001, namespace: load}, data: {i: changed}}\n---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-new, namespace: load}, data: {i: new}}"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Delete(context.Background(), api.Key{Kind: "ConfigMap", Namespace: "load", Name: "cm-00002"}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		changed, added := seen["cm-00001"] == "changed", seen["cm-new"] == "new"
		_, stillThere := seen["cm-00002"]
		total := len(seen)
		mu.Unlock()
		if changed && added && !stillThere {
			if total != n {
				t.Fatalf("informer holds %d objects, want %d", total, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the informer has not seen the changes within 60s: changed %v added %v deleted %v", changed, added, !stillThere)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := counter.lists.Load(); got != lists {
		t.Fatalf("the informer listed %d times after the restart; it should resume its watch", got-lists)
	}
	if counter.watchesFromRV.Load() == 0 {
		t.Fatal("no watch resumed from a resourceVersion")
	}
}
