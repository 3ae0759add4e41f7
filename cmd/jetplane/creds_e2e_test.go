package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
)

// A subscriber credential made by `jetplane creds create` against a
// running server reads the log at once; `creds revoke` cuts it off.
func TestCredsCreateAndRevoke(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	s := serve(t, bin, dir, "--nats-port", fmt.Sprint(port))
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if out, err := exec.Command(bin, "apply", "--server", s.url, "-f", "../../deploy/examples/").CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}

	creds := filepath.Join(t.TempDir(), "audit.creds")
	if out, err := exec.Command(bin, "creds", "create", "--data", dir, "--role", "subscriber", "audit", "-o", creds).CombinedOutput(); err != nil {
		t.Fatalf("creds create: %v\n%s", err, out)
	}
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("creds file: %v, %v; want mode 0600", fi, err)
	}
	opts, err := events.CredsOptions(creds)
	if err != nil {
		t.Fatal(err)
	}
	var nc *nats.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		if nc, err = nats.Connect(url, append(opts, nats.Timeout(2*time.Second), nats.MaxReconnects(0))...); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new credential is not admitted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatalf("subscriber cannot read the log: %v", err)
	}
	if st.CachedInfo().State.Msgs == 0 {
		t.Fatal("the log is empty")
	}

	out, err := exec.Command(bin, "creds", "ls", "--data", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "audit") || !strings.Contains(string(out), "subscriber") {
		t.Fatalf("creds ls: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "creds", "revoke", "--data", dir, "audit").CombinedOutput(); err != nil {
		t.Fatalf("creds revoke: %v\n%s", err, out)
	}
	deadline = time.Now().Add(30 * time.Second)
	for nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("the revoked credential is still connected")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if nc2, err := nats.Connect(url, append(opts, nats.Timeout(2*time.Second))...); err == nil {
		nc2.Close()
		t.Fatal("the revoked credential connected again")
	}
}
