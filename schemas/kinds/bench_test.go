package kinds

import (
	"fmt"
	"testing"
)

// seenKinds is a log with many kinds: the built-in ones, observed
// Kubernetes kinds and custom kinds in several groups.
func seenKinds(n int) []string {
	out := []string{"Deployment.apps", "ConfigMap", "Namespace", "Pod", "Node"}
	for i := range n {
		out = append(out, fmt.Sprintf("Custom%d.group%d.example.com", i, i%7))
	}
	return out
}

// BenchmarkResolve measures what resolving one kind name costs a request
// (the API resolves the kind parameter of every request), on a log with
// 100 kinds; "reference" is a map lookup of an exact kind, the cost of
// exact matching.
func BenchmarkResolve(b *testing.B) {
	seen := seenKinds(95)
	exact := map[string]bool{}
	for _, s := range seen {
		exact[s] = true
	}
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			if !exact["Deployment.apps"] {
				b.Fatal("missing")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/name")
	})
	for _, name := range []string{"Deployment.apps", "deploy", "Custom42", "Deploymnt"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, _ = Resolve(name, seen)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/name")
		})
	}
}
