package auth

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

// A subscriber's and a controller's creds files name their consumers'
// prefix, with a tag of their own that the store keeps and that differs
// from credential to credential; a store written before tags (no tag)
// still gives its credentials their permissions (decision 0122).
func TestCredentialsCarryAConsumerTag(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	prefixOf := func(data []byte) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "c.creds")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := events.CredsConsumerPrefix(path)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sub, _ := s.Create(RoleSubscriber, "audit")
	sub2, _ := s.Create(RoleSubscriber, "audit2")
	ctl, _ := s.CreateWithKinds(RoleController, "nets", []string{"Net.example.com"})
	node, _ := s.Create(RoleNode, "worker-1")
	list, _ := s.List()
	tags := map[string]string{}
	for _, c := range list {
		tags[c.Name] = c.Tag
	}
	if len(tags["audit"]) != 16 || tags["audit"] == tags["audit2"] || tags["nets"] == "" || tags["worker-1"] != "" {
		t.Fatalf("tags %v: want 16 random characters for subscribers and controllers only", tags)
	}
	if p := prefixOf(sub); p != "audit_"+tags["audit"] {
		t.Errorf("subscriber's prefix %q", p)
	}
	if p := prefixOf(sub2); p != "audit2_"+tags["audit2"] {
		t.Errorf("second subscriber's prefix %q", p)
	}
	if p := prefixOf(ctl); p != events.ControllerConsumers("nets", tags["nets"]) || p != "jp-ctl-nets_"+tags["nets"] {
		t.Errorf("controller's prefix %q", p)
	}
	if p := prefixOf(node); p != "" {
		t.Errorf("node's prefix %q", p)
	}

	// The store as an earlier jetplane wrote it: no tags.
	data, err := os.ReadFile(s.UsersPath())
	if err != nil {
		t.Fatal(err)
	}
	var u usersFile
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatal(err)
	}
	for i := range u.Users {
		u.Users[i].Tag = ""
	}
	data, _ = json.Marshal(u)
	if err := os.WriteFile(s.UsersPath(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := s.Users()
	if err != nil || len(users) != 5 {
		t.Fatalf("users of an untagged store: %d, %v", len(users), err)
	}
}
