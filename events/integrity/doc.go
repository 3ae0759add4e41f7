// Package integrity keeps and checks the proof that the log jetplane reads
// is the log it wrote (decision 0043): an Ed25519 key of the instance and
// signed checkpoints of the chain head (package events/chain), kept in the
// data directory's integrity/ directory, outside the stream's files; a
// check of the stored files against them, run before the NATS server
// loads its store and again while it runs; and the report that names what
// is missing, unreadable or changed.
//
// It reads the stream's files and never writes them; it knows nothing
// about kinds, the API or the gate (the app refuses writes on its report).
package integrity
