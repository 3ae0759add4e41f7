// Package auth is who may connect to jetplane's NATS and what each may do
// there. It owns the roles (instance, node, subscriber) and their
// least-privilege permission sets, built from the subjects and buckets
// that package events names, and the credentials store: NKey user keys in
// a directory (the data directory's auth/ by default), with the server
// side holding only public keys and every seed in a 0600 file.
//
// Guard enforces what permissions cannot say: how many consumers an
// outside credential holds, that it keeps no change to another's
// consumer, and that a revoked credential's consumers go (decision 0040).
//
// It does not run a server. events/embedded loads the store
// into the NATS server's options and reloads them when the store changes;
// `jetplane creds` edits the store.
package auth
