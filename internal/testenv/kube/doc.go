//go:build unix

// Package kubeenv runs a real kube-apiserver on a real etcd for jetplane's
// integration tests, in the manner of controller-runtime's envtest, but with
// nothing downloaded: both binaries are built from the pinned tools modules
// internal/tools/kubebin and internal/tools/etcdbin and cached per user.
//
// It owns the two processes it starts (in their own process groups, on free
// loopback ports, in a temporary directory) and stops them through
// tb.Cleanup; it must not be used outside tests and never reaches a cluster
// it did not start. Callers get an admin *rest.Config and a kubeconfig file.
package kubeenv
