// Package security holds jetplane's security test suite: every test here
// starts a real jetplane (embedded NATS, projection, API) and tries what
// an attacker on the machine, or a holder of a stolen credential, would
// try, and expects to be refused with the log unchanged (same last
// sequence, same state digest). It has no code outside its tests.
package security
