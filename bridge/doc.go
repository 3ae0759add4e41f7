// Package bridge brings the outside world into the log. Its subpackages are
// the ways in: manifest decodes and validates what people apply, gate turns
// validated objects into Applied and DeleteRequested events, and api serves
// the gate and the projections over HTTP. Bridges never reconcile.
package bridge
