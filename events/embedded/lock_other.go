//go:build !unix

package embedded

// lockDir does nothing where flock is not available.
func lockDir(string) (func(), error) { return func() {}, nil }
