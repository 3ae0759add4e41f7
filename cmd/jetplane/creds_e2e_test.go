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

// The security features through the binary, as the README shows them: a
// token file with roles, Secrets masked and shown, keys rotated, secret
// data destroyed; a subscriber credential made by `jetplane creds create`
// against a running server reads the log at once, and `creds revoke` cuts
// it off.
func TestSecurityThroughTheCLI(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# TOKEN NAME [ROLE [NAMESPACES]]\nadm ops\nrd audit reader shop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, bin, dir, "--nats-port", fmt.Sprint(port), "--token-file", tokens)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	cli := func(token string, args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--server", s.url, "--token", token)...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli("adm", "apply", "-f", "../../deploy/examples/"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := cli("rd", "apply", "-f", "../../deploy/examples/"); err == nil || !strings.Contains(out, "may not") {
		t.Fatalf("a reader applied: %v\n%s", err, out)
	}
	if out, err := cli("rd", "get", "ConfigMap", "-n", "shop"); err != nil || !strings.Contains(out, "web-settings") {
		t.Fatalf("a reader of shop lists shop: %v\n%s", err, out)
	}
	if out, err := cli("rd", "get", "ConfigMap", "-n", "default"); err == nil {
		t.Fatalf("a reader of shop listed default:\n%s", out)
	}
	secret := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(secret, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\nstringData: {password: hunter2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("adm", "apply", "-f", secret); err != nil {
		t.Fatalf("apply a Secret: %v\n%s", err, out)
	}
	if out, err := cli("adm", "get", "Secret/shop/db", "-o", "yaml"); err != nil || strings.Contains(out, "hunter2") || !strings.Contains(out, "*****") {
		t.Fatalf("get without --show-secrets: %v\n%s", err, out)
	}
	if out, err := cli("adm", "get", "Secret/shop/db", "-o", "yaml", "--show-secrets"); err != nil || !strings.Contains(out, "hunter2") {
		t.Fatalf("get --show-secrets as admin: %v\n%s", err, out)
	}
	if out, err := cli("rd", "get", "Secret/shop/db", "-o", "yaml", "--show-secrets"); err == nil {
		t.Fatalf("a reader saw secret values:\n%s", out)
	}
	if out, err := exec.Command(bin, "keys", "rotate", "--data", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "new primary key") {
		t.Fatalf("keys rotate: %v\n%s", err, out)
	}
	if out, err := cli("adm", "delete", "Secret/shop/db", "--purge-secret-data"); err != nil {
		t.Fatalf("delete --purge-secret-data: %v\n%s", err, out)
	}
	if out, err := cli("adm", "history", "Secret/shop/db", "-o", "json", "--show-secrets"); err != nil || strings.Contains(out, "hunter2") || !strings.Contains(out, "(destroyed)") {
		t.Fatalf("history after shredding: %v\n%s", err, out)
	}
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}

	creds := filepath.Join(t.TempDir(), "audit.creds")
	if out, err := exec.Command(bin, "creds", "create", "--data", dir, "--role", "subscriber", "audit", "-o", creds).CombinedOutput(); err != nil || !strings.Contains(string(out), "consumers' names start with audit_") {
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
