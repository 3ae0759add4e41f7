package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events/auth"
)

// creds token prints what its help promises: an ExecCredential with the
// token and its expiry, the token alone with --plain, and a refusal of a
// lifetime over an hour or of a credential that is not a controller's.
// The token it prints verifies against the store.
func TestCredsTokenAsHelpSays(t *testing.T) {
	store, err := auth.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctl, err := store.CreateWithKinds(auth.RoleController, "widgets", []string{"Widget.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := store.Create(auth.RoleSubscriber, "audit")
	if err != nil {
		t.Fatal(err)
	}
	ctlFile, subFile := write("widgets.creds", ctl), write("audit.creds", sub)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := execute(context.Background(), append([]string{"creds", "token"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, stderr := run(ctlFile)
	if code != 0 {
		t.Fatalf("creds token: exit %d: %s", code, stderr)
	}
	var ec struct {
		APIVersion, Kind string
		Status           struct {
			Token               string
			ExpirationTimestamp time.Time
		}
	}
	if err := json.Unmarshal([]byte(out), &ec); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if ec.APIVersion != "client.authentication.k8s.io/v1" || ec.Kind != "ExecCredential" || ec.Status.Token == "" {
		t.Fatalf("not an ExecCredential with a token: %s", out)
	}
	if d := time.Until(ec.Status.ExpirationTimestamp); d < 14*time.Minute || d > 15*time.Minute {
		t.Fatalf("expires in %s, want the default 15m", d)
	}
	if c, err := store.VerifyToken(ec.Status.Token, time.Now()); err != nil || c.Name != "widgets" {
		t.Fatalf("the printed token: %+v, %v", c, err)
	}

	code, out, stderr = run("--plain", "--ttl", "5m", ctlFile)
	if tok := strings.TrimSpace(out); code != 0 || !auth.IsToken(tok) || strings.Contains(out, "{") {
		t.Fatalf("--plain: exit %d, %q, %s", code, out, stderr)
	}
	for _, args := range [][]string{{"--ttl", "2h", ctlFile}, {subFile}, {filepath.Join(dir, "missing.creds")}} {
		if code, out, stderr := run(args...); code == 0 || out != "" || stderr == "" {
			t.Errorf("creds token %v: exit %d, stdout %q, stderr %q; want a refusal on stderr", args, code, out, stderr)
		}
	}
}
