// Package apptest runs a whole jetplane in-process for the tests of other
// packages (the node agent's, the workloads', the security suite's, the
// app's own): one way to start it, wait for it and stop it, so that a
// change to startup is made once. It is imported by tests only.
package apptest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
)

// StopWithin bounds how long stopping an instance may take.
const StopWithin = 30 * time.Second

// Run runs jetplane on cfg, not waiting for it to be ready, until the
// returned stop is called or the test ends. Unset, cfg gets a temporary
// data directory (unless it names an outside NATS), the API on
// 127.0.0.1 on a free port, the embedded NATS on a free port and a
// logger that discards. stop cancels Run and waits for it (at most
// StopWithin); an error Run returns fails the test. Calling stop twice is
// harmless.
func Run(tb testing.TB, cfg app.Config) (*app.App, func()) {
	tb.Helper()
	if cfg.DataDir == "" && cfg.NATS.URLs == "" {
		cfg.DataDir = tb.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.NATSPort == 0 {
		cfg.NATSPort = -1
	}
	if cfg.Logger == nil {
		// JETPLANE_TEST_LOG=1 shows the app's warnings (a benchmark's
		// partitions read again, leases lost); quiet otherwise.
		var logTo io.Writer = io.Discard
		if os.Getenv("JETPLANE_TEST_LOG") != "" {
			logTo = os.Stderr
		}
		cfg.Logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("app stopped with %v", err)
				}
			case <-time.After(StopWithin):
				tb.Errorf("app did not stop within %s", StopWithin)
			}
		})
	}
	tb.Cleanup(stop)
	return a, stop
}

// Start is Run, then WaitReady within d.
func Start(tb testing.TB, cfg app.Config, d time.Duration) (*app.App, func()) {
	tb.Helper()
	a, stop := Run(tb, cfg)
	if err := WaitReady(a, d); err != nil {
		stop()
		tb.Fatal(err)
	}
	return a, stop
}

// WaitReady polls a's /readyz until it answers 200 or d has passed. It
// checks readiness only: a test of TLS checks the certificate itself.
func WaitReady(a *app.App, d time.Duration) error {
	probe := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer probe.CloseIdleConnections()
	deadline := time.Now().Add(d)
	for {
		resp, err := probe.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jetplane not ready after %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	wasmMu    sync.Mutex
	wasmBuilt = map[string][]byte{}
)

// WASM builds the Go package pkg (a path such as ./testdata/module) for
// WASI into dir, once per test binary and package, and returns the
// module.
func WASM(tb testing.TB, dir, pkg string) []byte {
	tb.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	if b, ok := wasmBuilt[pkg]; ok {
		return b
	}
	out := filepath.Join(dir, filepath.Base(pkg)+".wasm")
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s for WASI: %v\n%s", pkg, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	wasmBuilt[pkg] = b
	return b
}

// Main runs a test binary's tests with a directory of its own for built
// and compiled modules (passed to set before the tests run), and removes
// it afterwards. Use it as TestMain's body: os.Exit(apptest.Main(m, ...)).
func Main(m *testing.M, prefix string, set func(dir string)) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	set(dir)
	return m.Run()
}
