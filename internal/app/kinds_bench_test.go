package app_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
)

// BenchmarkApplyKinds measures apply throughput of objects whose kind is
// checked: a ConfigMap and a Deployment (strict decoding into k8s.io/api
// types) and a Widget defined by a CRD with bounds, enums, defaults and a
// CEL rule. Each operation is one request of 500 new objects; it reports
// objects/s and the process's CPU time per object (server and client in
// one process). The same benchmark run on a build without the checks is
// the reference.
func BenchmarkApplyKinds(b *testing.B) {
	const perRequest = 500
	docs := map[string]func(i int) string{
		"ConfigMap": func(i int) string {
			return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d, namespace: bench}\ndata: {LOG_LEVEL: info, REGION: eu-west-1, N: %q}\n", i, fmt.Sprint(i))
		},
		"Deployment": func(i int) string {
			return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: d%d, namespace: bench}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web:1.2
        command: [serve]
        ports: [{name: http, containerPort: 8080}]
        env: [{name: LOG, value: info}]
        resources: {limits: {cpu: 500m, memory: 128Mi}}
`, i)
		},
		"Widget": func(i int) string {
			return widgetYAML("v1", fmt.Sprintf("w%d", i), fmt.Sprintf("{size: %d, color: red}", 1+i%9))
		},
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "Widget"} {
		b.Run(kind, func(b *testing.B) {
			_, c := startApp(b, app.Config{})
			ctx := context.Background()
			if _, err := c.Apply(ctx, "crd.yaml", []byte(widgetsCRD), ""); err != nil {
				b.Fatal(err)
			}
			n := 0
			var spent, cpu time.Duration
			for b.Loop() {
				var body strings.Builder
				for range perRequest {
					body.WriteString(docs[kind](n))
					body.WriteString("---\n")
					n++
				}
				cpu0, t0 := kindsProcessCPU(), time.Now()
				if _, err := c.ApplyBrief(ctx, "bench.yaml", []byte(body.String()), ""); err != nil {
					b.Fatal(err)
				}
				spent += time.Since(t0)
				cpu += kindsProcessCPU() - cpu0
			}
			b.ReportMetric(float64(n)/spent.Seconds(), "objects/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/object")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func kindsProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
