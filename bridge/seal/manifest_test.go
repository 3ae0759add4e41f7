package seal

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

func applyOf(t *testing.T, manifest map[string]any) *schemas.Object {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{"cluster": "east", "manifest": manifest})
	if err != nil {
		t.Fatal(err)
	}
	return &schemas.Object{Kind: ApplyKind, Metadata: &schemas.ObjectMeta{Name: "creds", Namespace: "shop"}, Spec: spec}
}

func manifestValue(o *schemas.Object, field, k string) string {
	return o.GetSpec().GetFields()["manifest"].GetStructValue().GetFields()[field].GetStructValue().GetFields()[k].GetStringValue()
}

// A Secret inside an Apply's manifest is sealed like a Secret, and only a
// Secret: other manifests are left as they are.
func TestSealApplyManifest(t *testing.T) {
	s := newSealer(t)
	ctx := context.Background()
	o := applyOf(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "creds"},
		"data": map[string]any{"token": "dG9r"}, "stringData": map[string]any{"pw": "hunter2"}})
	if !Holds(o) {
		t.Fatal("an Apply of a Secret holds no secrets?")
	}
	if err := s.Seal(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	for field, k := range map[string]string{"data": "token", "stringData": "pw"} {
		if v := manifestValue(o, field, k); !strings.HasPrefix(v, prefix) {
			t.Fatalf("manifest.%s.%s = %q, want it sealed", field, k, v)
		}
	}
	// Sealing again (a retried write) keeps the envelopes.
	env := manifestValue(o, "stringData", "pw")
	if err := s.Seal(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if manifestValue(o, "stringData", "pw") != env {
		t.Fatal("sealing a sealed value sealed it again")
	}
	if got := manifestValue(s.Reveal(ctx, o), "stringData", "pw"); got != "hunter2" {
		t.Fatalf("revealed %q", got)
	}
	if got := manifestValue(Mask(o), "data", "token"); got != Masked {
		t.Fatalf("masked %q", got)
	}
	// Moved to another object, an envelope does not open: it is sealed
	// as the literal text it is.
	moved := applyOf(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"pw": env}})
	moved.Metadata.Name = "other"
	if err := s.Seal(ctx, moved, nil); err != nil {
		t.Fatal(err)
	}
	if got := manifestValue(s.Reveal(ctx, moved), "stringData", "pw"); got != env {
		t.Fatalf("a copied envelope opened as %q", got)
	}

	cm := applyOf(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"a": "b"}})
	if Holds(cm) {
		t.Fatal("an Apply of a ConfigMap holds secrets?")
	}
	if err := s.Seal(ctx, cm, nil); err != nil || manifestValue(cm, "data", "a") != "b" {
		t.Fatalf("a ConfigMap manifest changed: %v", err)
	}
}

// Forget drops a data key another instance destroyed: values it sealed no
// longer open here, though this instance had it cached.
func TestForgetDestroyedKey(t *testing.T) {
	s := newSealer(t)
	ctx := context.Background()
	o := secret("db", map[string]any{"pw": "hunter2"})
	if err := s.Seal(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if got := value(s.Reveal(ctx, o), "pw"); got != "hunter2" {
		t.Fatalf("revealed %q", got)
	}
	// Another instance destroys the keys in the shared store.
	var ids []string
	store := s.keys.(*mapStore)
	store.mu.Lock()
	for id := range store.m {
		ids = append(ids, id)
		delete(store.m, id)
	}
	store.mu.Unlock()
	if got := value(s.Reveal(ctx, o), "pw"); got != "hunter2" {
		t.Fatalf("before Forget the cached key still opens it; got %q", got)
	}
	for _, id := range ids {
		s.Forget(id)
	}
	if got := value(s.Reveal(ctx, o), "pw"); got != Destroyed {
		t.Fatalf("after Forget: %q, want %q", got, Destroyed)
	}
}
