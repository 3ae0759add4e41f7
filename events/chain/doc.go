// Package chain is the hash chain over jetplane's stored log and the
// reader of the log's files that computes it.
//
// Every event stored in JP_EVENTS, in sequence order, extends one SHA-256
// chain (decision 0043):
//
//	h_0 = 32 zero bytes
//	h_n = SHA-256( h_{n-1}
//	             || uint64be(seq) || uint64be(stored time, Unix nanoseconds)
//	             || uint32be(len(subject)) || subject
//	             || uint32be(len(header))  || header
//	             || uint32be(len(data))    || data )
//
// subject is the stored subject (jp.ev.<partition>.<kind>.<ns>.<name>),
// header the NATS header block exactly as stored (empty when the event has
// none) and data the payload, all as JetStream's Get Message API returns
// them, so anyone holding the log can recompute the chain without
// jetplane's code. The chain is computed off the append path, by reading
// the stream's block files (Store); nothing is added to the events.
//
// The package reads the files of a stopped or running server and never
// writes them. It knows nothing about kinds, checkpoints or keys (package
// events/integrity signs and keeps heads).
package chain
