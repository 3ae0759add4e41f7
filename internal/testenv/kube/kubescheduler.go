//go:build unix

package kubeenv

import "context"

// schedulerBinary is kube-scheduler, for the scheduler's side-by-side
// benchmark (scheduler/perf); pinned by internal/tools/kubeschedbin.
var schedulerBinary = binary{
	name:      "kube-scheduler",
	toolsDir:  "kubeschedbin",
	module:    "k8s.io/kubernetes",
	pkg:       "k8s.io/kubernetes/cmd/kube-scheduler",
	buildTime: "a few minutes on two cores, less after kube-apiserver",
	ldflags:   apiserverBinary.ldflags,
}

// KubeScheduler returns the cached kube-scheduler, building it first when
// missing (as EnsureBinaries does for kube-apiserver and etcd).
func KubeScheduler(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return schedulerBinary.ensure(ctx, logf)
}
