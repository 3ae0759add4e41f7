package wasm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Guest modules are built from source once per test run.
var (
	buildOnce sync.Once
	buildDir  string
	cacheDir  string
	buildErr  error
	guests    = map[string]string{
		"labelfilter": "../guest/examples/labelfilter",
		"nodenumber":  "../guest/examples/nodenumber",
		"trap":        "./testdata/trap",
		"loop":        "./testdata/loop",
		"hog":         "./testdata/hog",
		"plain":       "./testdata/plain",
		"upstream":    "./testdata/upstream",
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// guestPath builds (once) and returns the module of guest name.
func guestPath(tb testing.TB, name string) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "jetplane-wasm-")
		if buildErr != nil {
			return
		}
		cacheDir = filepath.Join(buildDir, "cache")
		var wg sync.WaitGroup
		var mu sync.Mutex
		for n, src := range guests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, n+".wasm"), src)
				cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
				if out, err := cmd.CombinedOutput(); err != nil {
					mu.Lock()
					buildErr = fmt.Errorf("build %s: %v\n%s", n, err, out)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name+".wasm")
}

func args(tb testing.TB, name string) Args {
	return Args{GuestPath: guestPath(tb, name), CacheDir: filepath.Join(os.TempDir(), "jetplane-wasm-test-cache"), Timeout: "200ms", MemoryLimitPages: 1024}
}
