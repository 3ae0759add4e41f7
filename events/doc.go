// Package events owns jetplane's log: the JP_EVENTS JetStream stream, its
// subjects and their escaping, appending events (dedupe ids, optimistic
// concurrency, atomic batches), and reading them back (one key's history,
// replay, subscription). It is the only package that imports
// nats.go/jetstream; everything above it talks to the Log's methods and the
// sentinels it exports (ErrConflict, ErrNotFound), never to NATS error codes.
//
// It knows nothing about kinds: an event is a key and a payload.
//
// Subjects. Writers publish on the input subject jp.in.<kind>.<ns>.<name>;
// the stream's subject transform stores the event under
// jp.ev.<partition>.<kind>.<ns>.<name>, the partition computed by the server,
// so no publisher can choose its partition. The server applies the transform
// before optimistic-concurrency checks, so an expected version is compared
// with the key's stored subject. See
// docs/decisions/0001-subjects-and-partitions.md.
package events
