// Package api serves jetplane over HTTP with JSON (protojson of the
// schemas): apply, get, list, delete, watch (server-sent events, resumable
// from a resourceVersion), history and state-at, the Kubernetes clusters the
// bridge watches, plus health, readiness and Prometheus metrics. Client is
// the Go client the CLI uses.
//
// Writes go through the gate; reads come from the projection; history and
// as-of reads come from the log. The API never reconciles.
package api
