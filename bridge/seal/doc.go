// Package seal encrypts the secret fields of objects before they enter
// the log, in the shape of Kubernetes' encryption at rest: each value is
// sealed with AES-256-GCM under a data key of its object, and each data
// key is stored wrapped (AES-256-GCM) by a key-encryption key from a key
// file, in the JP_KEYS bucket outside the log. The log holds only
// envelopes, so its raw bytes never show a secret; destroying an object's
// data keys (crypto-shredding) makes its sealed values unreadable forever
// while its history keeps every event.
//
// It owns the envelope format, the key file and which fields are secret;
// it does not decide who may see a value (bridge/api does).
package seal
