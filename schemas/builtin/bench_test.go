package builtin_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/schemas/builtin"
)

const benchDeployment = `{replicas: 3, selector: {matchLabels: {app: web}},
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}},
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: 'web:1.2', command: [serve],
    args: ['--port=8080'], ports: [{name: http, containerPort: 8080}], env: [{name: LOG, value: info}],
    resources: {limits: {cpu: 500m, memory: 128Mi}, requests: {cpu: 100m, memory: 64Mi}}}]}}}`

// BenchmarkCheck is the per-object cost of strict decoding of a built-in
// kind's content.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct{ name, apiVersion, kind, spec string }{
		{"ConfigMap", "v1", "ConfigMap", "{data: {LOG_LEVEL: info, REGION: eu-west-1, FEATURES: 'a,b,c'}}"},
		{"Deployment", "apps/v1", "Deployment", benchDeployment},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := spec(b, bc.spec)
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if err := builtin.Check(bc.apiVersion, bc.kind, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used: on a machine shared
// with other builds, wall time per operation says more about the others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
