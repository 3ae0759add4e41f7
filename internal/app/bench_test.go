package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

// BenchmarkApplyToGet measures what a person or pipeline sees over HTTP on
// loopback: apply one manifest (a changed spec each time), then get the
// object, and report the latency of the pair as p50 and p99. The apply
// returns only once the projection shows the write, so the get always sees
// it.
func BenchmarkApplyToGet(b *testing.B) {
	for _, sync := range []string{"default", "always"} {
		b.Run("sync="+sync, func(b *testing.B) {
			_, c := startApp(b, app.Config{SyncAlways: sync == "always"})
			ctx := context.Background()
			key := api.Key{Kind: "ConfigMap", Namespace: "bench", Name: "latency"}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: latency, namespace: bench}\ndata: {round: %q}\n", fmt.Sprint(i))
				start := time.Now()
				if _, err := c.Apply(ctx, "bench", []byte(doc), ""); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Get(ctx, key); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
