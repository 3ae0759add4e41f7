package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

// BenchmarkSubscriptions writes JETPLANE_BENCH_CHANGES ConfigMap changes
// (default 10,000) in applies of 500, and measures how fast they reach a
// local sink through one subscription and through a hundred at once:
// deliveries per second from the first write to the last delivery, and
// p99 of the time from a change's event to its delivery. The write rate of
// the same run is the reference. The sink runs in the benchmark's process
// and only counts; it shares the machine's cores with jetplane.
func BenchmarkSubscriptions(b *testing.B) {
	changes := 10_000
	if v, err := strconv.Atoi(os.Getenv("JETPLANE_BENCH_CHANGES")); err == nil && v > 0 {
		changes = v
	}
	for _, subs := range []int{1, 100} {
		b.Run(fmt.Sprintf("subscriptions=%d", subs), func(b *testing.B) {
			for range b.N {
				benchSubscriptions(b, subs, changes)
			}
		})
	}
}

func benchSubscriptions(b *testing.B, subs, changes int) {
	_, c := startApp(b, app.Config{SubscriptionPrivateSinks: true})
	var mu sync.Mutex
	var lat []time.Duration
	delivered := 0
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e struct {
			Data struct {
				Time time.Time `json:"time"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &e)
		now := time.Now()
		mu.Lock()
		lat = append(lat, now.Sub(e.Data.Time))
		delivered++
		if delivered == subs*changes {
			close(all)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var docs []string
	for i := range subs {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Subscription\nmetadata: {name: s%d, namespace: ns}\nspec:\n  sink: {url: %q, allowHTTP: true}\n  filter: {kinds: [ConfigMap]}\n", i, srv.URL+"/s"+strconv.Itoa(i)))
	}
	mustApply(b, c, strings.Join(docs, "---\n"))
	// Every subscription has started (its first status) before the writes.
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := c.List(context.Background(), api.Query{Kind: "Subscription"})
		if err != nil {
			b.Fatal(err)
		}
		started := 0
		for _, raw := range l.Items {
			if strings.Contains(string(raw), `"delivered"`) {
				started++
			}
		}
		if started == subs {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d subscriptions started", started, subs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ResetTimer()
	began := time.Now()
	for i := 0; i < changes; i += 500 {
		var batch []string
		for j := i; j < min(i+500, changes); j++ {
			batch = append(batch, cm(fmt.Sprintf("c%d", j), "", "v: x"))
		}
		mustApply(b, c, strings.Join(batch, "---\n"))
	}
	written := time.Since(began)
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		b.Fatalf("%d of %d deliveries after 10 minutes", delivered, subs*changes)
	}
	took := time.Since(began)
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	b.ReportMetric(float64(changes)/written.Seconds(), "changes-written/s")
	b.ReportMetric(float64(subs*changes)/took.Seconds(), "deliveries/s")
	b.ReportMetric(float64(changes)/took.Seconds(), "deliveries/s/subscription")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
}
