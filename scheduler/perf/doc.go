// Package perf holds the scheduler's benchmarks, in the manner of
// Kubernetes' scheduler_perf: a cluster of fake nodes and pending pods in
// the log, the scheduler driven directly, pods/s measured until every
// Bound event is acknowledged; and kube-scheduler v1.36.3, built from
// source, measured the same way against the test kube-apiserver in the
// same run. It has no code outside its tests.
package perf
