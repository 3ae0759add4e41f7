// Package bridge brings the outside world into the log. Its subpackages are
// the ways in: gate turns validated objects into Applied and DeleteRequested
// events, api serves the gate and the projections over HTTP, kube turns
// Kubernetes watch events into Observed events, and console serves the web
// console. The rules of kinds (decoding, validation, kind names) come from
// schemas/manifest, schemas/kinds and schemas/podspec; bridges never
// reconcile and never import a reconciler.
package bridge
