package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// TestSubscriptionsSurviveTheKillOfTheirInstance runs eight subscriptions on
// three jetplane processes (one embedded NATS cluster), kills with SIGKILL
// the instance that delivers the most of them while changes keep coming,
// and checks every change still reaches every subscription.
func TestSubscriptionsSurviveTheKillOfTheirInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-process cluster")
	}
	bin := buildProbe(t)
	dir := t.TempDir()
	ports := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	// One sink, a path per subscription.
	var mu sync.Mutex
	got := map[string]map[string]map[uint64]bool{} // path -> object -> sequences
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e subscription.Event
		if err := json.Unmarshal(body, &e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if got[r.URL.Path] == nil {
			got[r.URL.Path] = map[string]map[uint64]bool{}
		}
		k := e.Data.Key.Name
		if got[r.URL.Path][k] == nil {
			got[r.URL.Path][k] = map[uint64]bool{}
		}
		got[r.URL.Path][k][e.Data.Sequence] = true
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	nodes := make([]*node, 3)
	urls := make([]<-chan string, 3)
	for i := range nodes {
		name := fmt.Sprintf("i%d", i+1)
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		nodes[i] = &node{name: name, log: logf, runs: filepath.Join(dir, name+".runs"), args: []string{
			"--instance", name, "--listen", "127.0.0.1:0", "--replicas", "3", "--subscription-private-sinks",
			"--data", filepath.Join(dir, name), "--nats-name", fmt.Sprintf("n%d", i+1), "--nats-cluster", "jp",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[i]), "--nats-routes", strings.Join(routes, ","),
		}}
		urls[i] = nodes[i].start(t, bin)
	}
	for i, n := range nodes {
		n.connect(t, urls[i])
	}
	c := nodes[0].c
	var subs []string
	for i := range 8 {
		subs = append(subs, fmt.Sprintf(`apiVersion: v1
kind: Subscription
metadata: {name: s%d, namespace: ns}
spec:
  sink: {url: "%s/s%d", allowHTTP: true}
  filter: {kinds: [ConfigMap]}
  start: "0"
`, i, srv.URL, i))
	}
	mustApply(t, c, strings.Join(subs, "---\n"))

	// Applies are retried, as a client does while the log elects a new
	// leader after the kill.
	apply := func(c *api.Client, from, to int) {
		for i := from; i < to; i++ {
			doc := []byte(cm(fmt.Sprintf("c%d", i), "", fmt.Sprintf("v: \"%d\"", i)))
			deadline := time.Now().Add(time.Minute)
			for {
				_, err := c.Apply(context.Background(), "test.yaml", doc, "")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("apply c%d: %v", i, err)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	apply(c, 0, 40)
	// Which instance delivers each subscription: the actor of its last
	// status write.
	deliverer := func(name string) string {
		h, err := c.History(context.Background(), api.Key{Kind: "Subscription", Namespace: "ns", Name: name})
		if err != nil {
			return ""
		}
		for i := len(h.Events) - 1; i >= 0; i-- {
			var ev struct {
				Type  string `json:"type"`
				Actor string `json:"actor"`
			}
			_ = json.Unmarshal(h.Events[i], &ev)
			if _, who, ok := strings.Cut(ev.Actor, "@"); ok {
				return who
			}
		}
		return ""
	}
	count := map[string]int{}
	eventuallyWithin(t, 2*time.Minute, "every subscription delivering", func() bool {
		clear(count)
		for i := range 8 {
			who := deliverer(fmt.Sprintf("s%d", i))
			if who == "" {
				return false
			}
			count[who]++
		}
		return true
	})
	victim := nodes[0]
	for _, n := range nodes {
		if count[n.name] > count[victim.name] {
			victim = n
		}
	}
	t.Logf("deliverers: %v; killing %s", count, victim.name)
	var survivor *node
	for _, n := range nodes {
		if n != victim {
			survivor = n
			break
		}
	}
	// Changes keep coming from a survivor while the victim dies.
	done := make(chan struct{})
	go func() {
		defer close(done)
		apply(survivor.c, 40, 80)
	}()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	<-done
	apply(survivor.c, 80, 100)

	// Every ConfigMap event of the log, read through a survivor.
	want := map[string][]uint64{}
	for i := range 100 {
		name := fmt.Sprintf("c%d", i)
		h, err := survivor.c.History(context.Background(), key(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range h.Events {
			var ev struct {
				Sequence uint64 `json:"sequence,string"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			want[name] = append(want[name], ev.Sequence)
		}
	}
	eventuallyWithin(t, 3*time.Minute, "every change at every subscription", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range 8 {
			path := fmt.Sprintf("/s%d", i)
			for name, seqs := range want {
				for _, q := range seqs {
					if !got[path][name][q] {
						return false
					}
				}
			}
		}
		return len(want) == 100
	})
}
