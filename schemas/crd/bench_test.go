package crd_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
)

// BenchmarkAdmit is the per-object cost of checking an object of a kind
// defined by a CRD whose schema has bounds, enums, a pattern, defaults,
// a list-map and a CEL rule: prune, default, validate, CEL, and the copy
// at the storage version.
func BenchmarkAdmit(b *testing.B) {
	cat := crd.NewCatalog([]*schemas.Object{widgetCRD(b)})
	objs := decode(b, widget("{size: 3, name: web, ports: [{port: 80}, {port: 443}], extra: {a: 1}}"))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := cat.Admit(objs, crd.Admission{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkCompile is the cost of compiling the CRD (validation, schemas
// and CEL programs), paid once per CRD change per instance.
func BenchmarkCompile(b *testing.B) {
	o := widgetCRD(b)
	start := cpuTime()
	for b.Loop() {
		if _, err := crd.Compile(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time this process has used: on a machine shared
// with other builds, wall time per operation says more about the others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
