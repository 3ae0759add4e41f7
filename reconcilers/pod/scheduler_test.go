package pod_test

import (
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/scheduler"
)

// The scheduler of issue 10 is what the Pod reconciler delegates unbound
// pods to.
var _ pod.Scheduler = (*scheduler.Scheduler)(nil)
