// Package testenv starts the real dependencies jetplane's tests run against:
// an embedded NATS server with JetStream on a temporary store. Everything it
// starts is stopped by t.Cleanup.
package testenv
