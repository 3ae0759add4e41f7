// Package kubeapi serves the Kubernetes API as one more edge of jetplane,
// so that kubectl, client-go informers and controller-runtime controllers
// work against it unchanged (decision 0065).
//
// It translates and decides nothing: reads come from the projections
// (projections.Store), writes go through the gate (gate.Gate) with the
// request's principal, and an object's resourceVersion is the log sequence
// of its key's last event. Objects go out in Kubernetes' shape (a
// ConfigMap's data at the top level) and come in through the same manifest
// decoding as every other write. It must not write the log except through
// the gate, nor hold state of its own beyond a request.
package kubeapi
