package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

// fanOut is what watchers of one ConfigMap saw while it changed.
type fanOut struct {
	// delays are, for each delivery to each watcher, how long after its
	// write began the watcher read the change.
	delays []time.Duration
	// missing counts deliveries that never came.
	missing int
	// cpu is this process's CPU time (jetplane's and the watchers')
	// from the first change to the last delivery.
	cpu time.Duration
}

func (f fanOut) quantile(q float64) time.Duration {
	if len(f.delays) == 0 {
		return 0
	}
	return f.delays[min(len(f.delays)-1, int(float64(len(f.delays))*q))]
}

// watchFanOut opens watchers Kubernetes API watches of the ConfigMaps of
// one namespace on a, then changes one ConfigMap changes times, every
// interval, and measures how long each change takes to reach each
// watcher. The watchers read the stream as a client does, one JSON event
// a line, picking the change's number out of the line.
func watchFanOut(tb testing.TB, a *app.App, watchers, changes int, interval time.Duration) fanOut {
	tb.Helper()
	c := &api.Client{BaseURL: a.URL()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := c.ApplyBrief(ctx, "t", []byte(`{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: fan}, data: {i: "-1"}}`), ""); err != nil {
		tb.Fatal(err)
	}
	from := a.Store().Seq()
	tr := &http.Transport{MaxIdleConnsPerHost: watchers, MaxConnsPerHost: 0, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := fmt.Sprintf("%s/api/v1/namespaces/fan/configmaps?watch=true&resourceVersion=%d", a.URL(), from)

	sent := make([]time.Time, changes)
	got := make([][]time.Time, watchers) // got[w][j]: when watcher w read change j
	var connected, finished sync.WaitGroup
	errs := make(chan error, watchers)
	for w := range watchers {
		got[w] = make([]time.Time, changes)
		connected.Add(1)
		finished.Add(1)
		go func() {
			defer finished.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			connected.Done()
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("watch %d: %s", w, resp.Status)
				return
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
			marker := []byte(`"i":"`)
			seen := 0
			for seen < changes && sc.Scan() {
				at := time.Now()
				line := sc.Bytes()
				i := bytes.Index(line, marker)
				if i < 0 {
					continue
				}
				rest := line[i+len(marker):]
				j, err := strconv.Atoi(string(rest[:bytes.IndexByte(rest, '"')]))
				if err != nil || j < 0 || j >= changes {
					continue
				}
				if got[w][j].IsZero() {
					got[w][j] = at
					seen++
				}
			}
		}()
	}
	connected.Wait()
	select {
	case err := <-errs:
		tb.Fatalf("opening %d watches: %v", watchers, err)
	default:
	}

	cpu0 := cpuTime()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for j := range changes {
		<-tick.C
		sent[j] = time.Now()
		doc := fmt.Appendf(nil, `{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: fan}, data: {i: "%d"}}`, j)
		if _, err := c.ApplyBrief(ctx, "t", doc, ""); err != nil {
			tb.Fatal(err)
		}
	}
	// Every watcher ends once it has every change; a watcher that lost
	// some ends with the deadline.
	done := make(chan struct{})
	go func() { finished.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cancel()
		<-done
	}
	f := fanOut{cpu: cpuTime() - cpu0}
	for w := range watchers {
		for j := range changes {
			if got[w][j].IsZero() {
				f.missing++
				continue
			}
			f.delays = append(f.delays, got[w][j].Sub(sent[j]))
		}
	}
	slices.Sort(f.delays)
	return f
}

// TestThousandWatchers opens 1,000 watches on one jetplane and checks that
// every change reaches every one of them; it logs the delivery delays
// (BenchmarkWatchers measures them).
func TestThousandWatchers(t *testing.T) {
	a, _ := startApp(t, app.Config{})
	f := watchFanOut(t, a, 1000, 20, 50*time.Millisecond)
	if f.missing > 0 {
		t.Fatalf("%d of %d deliveries never came", f.missing, 1000*20)
	}
	t.Logf("1,000 watchers, 20 changes: delivery p50 %s, p99 %s, max %s; CPU %s per delivery",
		f.quantile(0.5), f.quantile(0.99), f.quantile(1), f.cpu/time.Duration(1000*20))
}

// BenchmarkWatchers is 1,000 concurrent Kubernetes API watches of one
// namespace on one jetplane (default durability) while one ConfigMap in
// it changes 20 times a second, 200 times: it reports the delay from the
// start of each write to each watcher reading the change (p50, p99, max;
// the medians come from -count), the process's CPU per delivery (jetplane
// and the watching clients, which share it) and deliveries that never
// came.
func BenchmarkWatchers(b *testing.B) {
	const watchers, changes = 1000, 200
	var p50, p99, maxd, cpu []float64
	missing := 0
	for range b.N {
		a, _ := startApp(b, app.Config{})
		f := watchFanOut(b, a, watchers, changes, 50*time.Millisecond)
		missing += f.missing
		ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
		p50, p99, maxd = append(p50, ms(f.quantile(0.5))), append(p99, ms(f.quantile(0.99))), append(maxd, ms(f.quantile(1)))
		cpu = append(cpu, float64(f.cpu.Nanoseconds())/1000/float64(watchers*changes))
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	b.ReportMetric(mean(p50), "p50-ms")
	b.ReportMetric(mean(p99), "p99-ms")
	b.ReportMetric(mean(maxd), "max-ms")
	b.ReportMetric(mean(cpu), "cpu-us/delivery")
	b.ReportMetric(float64(missing), "missing")
	b.ReportMetric(0, "ns/op")
}
