package app_test

import (
	"os"
	"testing"

	"github.com/jetplane/jetplane/internal/apptest"
)

// scratch is this test binary's directory for programs built once and
// shared by its tests and benchmarks (-count runs them again); it is
// removed when the binary ends.
var scratch string

func TestMain(m *testing.M) {
	os.Exit(apptest.Main(m, "jetplane-app-test-", func(dir string) { scratch = dir }))
}
