package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/events"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
)

// BenchmarkBridge measures the bridge while 2,000 ConfigMaps are created
// and then updated as fast as a real apiserver takes them (4 writers). It
// reports:
//   - latency-p50-ms, latency-p99-ms: from the moment the apiserver
//     answered a write to the moment the change is in the log and folded
//     into the projection (the event the watch delivered, appended; the
//     watch may deliver before the writer hears back, so a few are ~0);
//   - append-p50-ms, append-p99-ms: from the apiserver's answer to the
//     moment the log acknowledged the appended event (the end of the
//     pipelined round that carried it), without the fold;
//   - handler-p50-ms, handler-p99-ms: from the informer handler's receipt of
//     the watch event (the event's time) to that acknowledgement: the
//     bridge's own share (queue, convert, append);
//   - bridge-events/s: changes appended per second, from the first write to
//     the last change folded;
//   - apiserver-writes/s: the apiserver's own write rate in the same run
//     (writes answered per second), the reference.
func BenchmarkBridge(b *testing.B) {
	const n, writers = 2000, 4
	env := kubeenv.Start(b)
	for i := range b.N {
		plain, st := logAndState(b)
		log := &timedLog{Log: plain, acked: map[string]time.Time{}, received: map[string]time.Time{}}
		rc := env.RESTConfig()
		rc.QPS, rc.Burst = 1e6, 1e6
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			b.Fatal(err)
		}
		ns := fmt.Sprint("bench-", i)
		createNamespace(b, cs, ns)
		cluster := fmt.Sprint("bench", i)
		br := startBridge(b, log, st, kube.Cluster{Name: cluster, REST: env.RESTConfig(), Resources: []kube.Resource{configMaps(ns)}})
		waitSynced(b, br)

		// Every change the projection folds, by Kubernetes resourceVersion.
		changes, stop, err := st.Watch(projections.Query{Kind: "ConfigMap", Namespace: cluster + "/" + ns}, st.Seq())
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		folded := map[string]time.Time{}
		all := make(chan struct{})
		go func() {
			defer stop()
			for c := range changes {
				rv := c.Object.GetMetadata().GetAnnotations()["jetplane.io/resource-version"]
				mu.Lock()
				folded[rv] = time.Now()
				done := len(folded) == 2*n
				mu.Unlock()
				if done {
					close(all)
					return
				}
			}
		}()

		answered := map[string]time.Time{}
		write := func(update bool) {
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := w; j < n; j += writers {
						cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", j), Namespace: ns}, Data: map[string]string{"v": "1"}}
						var got *corev1.ConfigMap
						var err error
						if update {
							cm.Data["v"] = "2"
							got, err = cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
						} else {
							got, err = cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
						}
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						answered[got.ResourceVersion] = time.Now()
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		}
		start := time.Now()
		write(false)
		write(true)
		writesDone := time.Since(start)
		select {
		case <-all:
		case <-time.After(2 * time.Minute):
			b.Fatalf("only %d of %d changes folded", len(folded), 2*n)
		}
		mu.Lock()
		var last time.Time
		lat := make([]time.Duration, 0, len(answered))
		var appendLat, handlerLat []time.Duration
		log.mu.Lock()
		for rv, at := range answered {
			f := folded[rv]
			if f.After(last) {
				last = f
			}
			lat = append(lat, max(f.Sub(at), 0))
			if acked, ok := log.acked[rv]; ok {
				appendLat = append(appendLat, max(acked.Sub(at), 0))
				handlerLat = append(handlerLat, acked.Sub(log.received[rv]))
			}
		}
		log.mu.Unlock()
		mu.Unlock()
		report := func(d []time.Duration, name string) {
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-p50-ms")
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, name+"-p99-ms")
		}
		report(lat, "latency")
		report(appendLat, "append")
		report(handlerLat, "handler")
		b.ReportMetric(float64(2*n)/last.Sub(start).Seconds(), "bridge-events/s")
		b.ReportMetric(float64(2*n)/writesDone.Seconds(), "apiserver-writes/s")
		b.ReportMetric(0, "ns/op")
		br.stop()
	}
}

// timedLog notes when the log acknowledged each Observed event, by
// Kubernetes resourceVersion, and when the bridge received its change.
type timedLog struct {
	*events.Log
	mu       sync.Mutex
	acked    map[string]time.Time
	received map[string]time.Time
}

func (l *timedLog) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	res, errs := l.Log.AppendAsync(ctx, entries)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range entries {
		if errs != nil && errs[i] != nil {
			continue
		}
		// k8s/<cluster>/<uid>/<resourceVersion>/<change>
		if parts := strings.Split(e.Event.GetId(), "/"); len(parts) == 5 && parts[4] == string(kube.Observed) {
			l.acked[parts[3]] = now
			l.received[parts[3]] = e.Event.GetTime().AsTime()
		}
	}
	return res, errs
}
