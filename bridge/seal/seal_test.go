package seal

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// mapStore is a KeyStore in memory, for tests of the sealing logic alone
// (the real one, events.KeyBucket, is tested in internal/security).
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Create(_ context.Context, id string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		return fmt.Errorf("%s exists", id)
	}
	s.m[id] = v
	return nil
}

func (s *mapStore) Get(_ context.Context, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return nil, events.ErrNotFound
	}
	return v, nil
}

func (s *mapStore) Destroy(_ context.Context, prefix string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range s.m {
		if strings.HasPrefix(id, prefix+".") {
			delete(s.m, id)
			n++
		}
	}
	return n, nil
}

func secret(name string, data map[string]any) *schemas.Object {
	spec, err := structpb.NewStruct(map[string]any{"data": data})
	if err != nil {
		panic(err)
	}
	return &schemas.Object{Kind: "Secret", Metadata: &schemas.ObjectMeta{Name: name, Namespace: "ns"}, Spec: spec}
}

func value(o *schemas.Object, k string) string {
	return o.GetSpec().GetFields()["data"].GetStructValue().GetFields()[k].GetStringValue()
}

func newSealer(t *testing.T) *Sealer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if _, err := RotateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	s, err := New(path, &mapStore{m: map[string][]byte{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealRevealMask(t *testing.T) {
	s := newSealer(t)
	ctx := context.Background()
	o := secret("a", map[string]any{"pw": "hunter2"})
	if err := s.Seal(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if v := value(o, "pw"); !strings.HasPrefix(v, prefix+s.Primary()+":") {
		t.Fatalf("sealed value %q", v)
	}
	if got := value(s.Reveal(ctx, o), "pw"); got != "hunter2" {
		t.Fatalf("reveal = %q", got)
	}
	if got := value(Mask(o), "pw"); got != Masked {
		t.Fatalf("mask = %q", got)
	}
	if !strings.HasPrefix(value(o, "pw"), prefix) {
		t.Fatal("Mask or Reveal changed the object")
	}
	// The same value again keeps its envelope; another one does not.
	again := secret("a", map[string]any{"pw": "hunter2", "user": "bob"})
	if err := s.Seal(ctx, again, o); err != nil {
		t.Fatal(err)
	}
	if value(again, "pw") != value(o, "pw") {
		t.Fatal("an unchanged value was sealed anew")
	}
	// An envelope moved to another object or key does not open.
	moved := secret("b", map[string]any{"pw": value(o, "pw")})
	if got := value(s.Reveal(ctx, moved), "pw"); got == "hunter2" {
		t.Fatal("an envelope opened on another object")
	}
	renamed := secret("a", map[string]any{"other": value(o, "pw")})
	if got := value(s.Reveal(ctx, renamed), "other"); got == "hunter2" {
		t.Fatal("an envelope opened under another key")
	}
	if _, err := s.Shred(ctx, "Secret", "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if got := value(s.Reveal(ctx, o), "pw"); got != Destroyed {
		t.Fatalf("after shredding: %q", got)
	}
}

func TestSealRefusals(t *testing.T) {
	ctx := context.Background()
	var none *Sealer
	if err := none.Seal(ctx, secret("a", map[string]any{"pw": "x"}), nil); err != ErrNoKey {
		t.Fatalf("no sealer: %v, want ErrNoKey", err)
	}
	if err := newSealer(t).Seal(ctx, secret("a", map[string]any{"n": 3.0}), nil); err == nil || !strings.Contains(err.Error(), "spec.data.n") {
		t.Fatalf("a number: %v, want an error naming spec.data.n", err)
	}
	cm := &schemas.Object{Kind: "ConfigMap", Spec: secret("a", map[string]any{"pw": "x"}).Spec}
	if err := none.Seal(ctx, cm, nil); err != nil {
		t.Fatalf("a ConfigMap needs no key: %v", err)
	}
}
