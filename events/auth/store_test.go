package auth

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/events"
)

func TestStoreCreateRevokeUsers(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.InstanceCreds()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("instance creds: %v, %v; want mode 0600", fi, err)
	}
	if _, err := s.Create(RoleSubscriber, "audit"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(RoleNode, "audit"); err == nil {
		t.Fatal("a second live credential with the same name")
	}
	if _, err := s.Create(RoleInstance, "x"); err == nil {
		t.Fatal("handed out an instance credential")
	}
	if _, err := s.Create(RoleNode, ""); err == nil {
		t.Fatal("a nameless node credential")
	}
	users, err := s.Users()
	if err != nil || len(users) != 2 {
		t.Fatalf("users = %d, %v; want the instance and audit", len(users), err)
	}
	if err := s.Revoke("audit"); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke("audit"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke twice: %v, want ErrNotFound", err)
	}
	if users, _ := s.Users(); len(users) != 1 {
		t.Fatalf("a revoked credential is still a user (%d users)", len(users))
	}
	// The name is free again once revoked.
	if _, err := s.Create(RoleNode, "audit"); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List()
	if len(list) != 2 || list[0].Revoked == nil || list[1].Revoked != nil {
		t.Fatalf("list = %+v", list)
	}
}

// Servers of one cluster sharing a store and starting at once end with one
// instance credential.
func TestStoreSharedInstanceCredential(t *testing.T) {
	dir := t.TempDir()
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			s, err := Open(dir)
			if err != nil {
				t.Error(err)
				return
			}
			data, _ := os.ReadFile(s.InstanceCreds())
			keys[i] = string(data)
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] || k == "" {
			t.Fatal("servers sharing a store got different instance credentials")
		}
	}
}

// A creds file connects with its NKey and the inbox its permissions allow.
func TestCredsFileOptions(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Create(RoleNode, "worker.1")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/n.creds"
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := events.CredsOptions(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 2 {
		t.Fatalf("%d options, want the NKey and the inbox prefix", len(opts))
	}
	p := NodePermissions("worker.1")
	if got, want := p.Subscribe.Allow[0], InboxPrefix(RoleNode, "worker.1")+".>"; got != want || want != "_INBOX.node.worker~2E1.>" {
		t.Fatalf("node inbox %q, want %q", got, want)
	}
}
