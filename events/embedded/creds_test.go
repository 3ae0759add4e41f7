package embedded

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/jetplane/jetplane/events/auth"
)

// Only a client that signs the server's nonce with a credential's key is
// admitted; a credential made while the server runs works within the
// poll, and a revoked one is disconnected and refused from then on.
func TestCredentialsAdmitOnlyTheirKeyHolders(t *testing.T) {
	s, err := Start(Config{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	url := s.ClientURL()

	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a client without a credential was admitted")
	}
	creds, err := s.Creds().Create(auth.RoleSubscriber, "reader")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.ParseDecoratedNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	// The right public key, signed by another key.
	other, _ := nkeys.CreateUser()
	if nc, err := nats.Connect(url, nats.NoReconnect(), nats.Nkey(pub, other.Sign)); err == nil {
		nc.Close()
		t.Fatal("a client that cannot sign for the key was admitted")
	}
	var nc *nats.Conn
	deadline := time.Now().Add(10 * time.Second)
	for nc == nil {
		if nc, err = nats.Connect(url, nats.Nkey(pub, kp.Sign), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond)); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("a new credential is not admitted: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer nc.Close()
	// Its role's permissions hold: a subscriber may not publish to the log.
	errs := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	if err := nc.Publish("jp.events.x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("publish to the log: %v; want a permissions violation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a subscriber published to the log without a permissions violation")
	}

	if err := s.Creds().Revoke("reader"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("a revoked credential's connection is still connected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if again, err := nats.Connect(url, nats.NoReconnect(), nats.Nkey(pub, kp.Sign)); err == nil {
		again.Close()
		t.Fatal("a revoked credential was admitted")
	}
}
