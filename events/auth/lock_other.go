//go:build !unix

package auth

// lockFile is a no-op where flock does not exist; one writer at a time is
// then the operator's to ensure.
func lockFile(string) (func(), error) { return func() {}, nil }
