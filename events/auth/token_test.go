package auth

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// A controller token is good for its credential until it expires or the
// credential is revoked; a token signed by another key, one too
// long-lived or one of another role is refused.
func TestControllerToken(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := s.CreateWithKinds(RoleController, "widgets", []string{"Widget.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	gadgets, err := s.CreateWithKinds(RoleController, "gadgets", []string{"Gadget.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := s.Create(RoleSubscriber, "audit")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, exp, err := SignToken(widgets, 10*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if !IsToken(tok) || exp.Before(now.Add(9*time.Minute)) {
		t.Fatalf("token %q expiring %s", tok, exp)
	}
	c, err := s.VerifyToken(tok, now)
	if err != nil || c.Name != "widgets" {
		t.Fatalf("verify: %+v, %v", c, err)
	}
	if _, _, err := SignToken(widgets, 2*MaxTokenLifetime, now); err == nil {
		t.Fatal("a token living longer than MaxTokenLifetime was signed")
	}
	if _, _, err := SignToken(widgets, 500*time.Millisecond, now); err == nil {
		t.Fatal("a token living under a second was signed")
	}
	if _, _, err := SignToken(audit, time.Minute, now); err == nil {
		t.Fatal("a subscriber credential signed a controller token")
	}
	other, _, err := SignToken(gadgets, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	// What a NATS server gets when it sends a token's body as its nonce:
	// the key's signature of the body itself.
	kp, err := nkeys.ParseDecoratedNKey(widgets)
	if err != nil {
		t.Fatal(err)
	}
	body := TokenPrefix + "widgets." + strconv.FormatInt(exp.Unix(), 10)
	nonceSig, err := kp.Sign([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	asNonce := body + "." + base64.RawURLEncoding.EncodeToString(nonceSig)
	// gadgets' signature under widgets' name.
	forged := TokenPrefix + "widgets" + strings.TrimPrefix(other, TokenPrefix+"gadgets")
	for _, tc := range []struct {
		name, tok string
		at        time.Time
	}{
		{"expired", tok, exp},
		{"signed by another credential", forged, now},
		{"malformed", TokenPrefix + "widgets.x.y", now},
		{"a nonce's signature", asNonce, now},
		{"a changed expiry", strings.Replace(tok, "."+strconv.FormatInt(exp.Unix(), 10)+".", "."+strconv.FormatInt(exp.Unix()+60, 10)+".", 1), now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.VerifyToken(tc.tok, tc.at); !errors.Is(err, ErrBadToken) {
				t.Fatalf("want ErrBadToken, got %v", err)
			}
		})
	}
	// Revoked by another process (`jetplane creds revoke` opens the
	// directory itself): the next check refuses the token, although the
	// checking store has the file cached.
	cli, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Revoke("widgets"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyToken(tok, now); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a revoked credential's token: %v", err)
	}
	// A credential created meanwhile is admitted at once.
	if _, err := s.VerifyToken(other, now); err != nil {
		t.Fatalf("gadgets before: %v", err)
	}
	fresh, err := cli.CreateWithKinds(RoleController, "fresh", []string{"Fresh.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	ftok, _, err := SignToken(fresh, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.VerifyToken(ftok, now); err != nil || c.Name != "fresh" {
		t.Fatalf("a new credential's token: %+v, %v", c, err)
	}
}
