package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// A Foreground or Orphan deletion records Kubernetes' finalizer on its
// DeleteRequested event; Background records none; anything else is
// refused before a write.
func TestDeleteRecordsThePropagationPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := gate.Principal{Name: "user/admin", Role: gate.RoleAdmin}
	for _, tc := range []struct {
		prop gate.Propagation
		want []string
	}{{gate.Background, nil}, {gate.Foreground, []string{gate.FinalizerForeground}}, {gate.Orphan, []string{gate.FinalizerOrphan}}} {
		name := map[gate.Propagation]string{gate.Background: "bg", gate.Foreground: "fg", gate.Orphan: "orphan"}[tc.prop]
		if _, err := e.gate.Apply(ctx, admin, decode(t, cm("shop", name, "")), ""); err != nil {
			t.Fatal(err)
		}
		k := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: name}
		if _, err := e.gate.DeleteWith(ctx, admin, k, "", tc.prop); err != nil {
			t.Fatal(err)
		}
		evs, err := e.log.History(ctx, k.Proto())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			if ev.GetType() == schemas.EventType_EVENT_TYPE_DELETE_REQUESTED {
				got = ev.GetObject().GetMetadata().GetFinalizers()
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: DeleteRequested finalizers %v, want %v", tc.prop, got, tc.want)
		}
	}
	if _, err := e.gate.DeleteWith(ctx, admin, projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "x"}, "", "Sideways"); !errors.Is(err, gate.ErrInvalid) {
		t.Fatalf("an unknown policy: %v, want ErrInvalid", err)
	}
}

// Only the owner's controller releases a dependent; released, it has no
// owner and its former owner may adopt it again.
func TestReleaseIsForTheOwnersControllerOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := gate.Principal{Name: "user/admin", Role: gate.RoleAdmin}
	if _, err := e.gate.Apply(ctx, admin, decode(t, relYAML), ""); err != nil {
		t.Fatal(err)
	}
	rel := e.store.Get(projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "web"})
	ctl := gate.Controller("reconciler/HelmRelease", rel)
	if _, err := e.gate.Apply(ctx, ctl, decode(t, cm("shop", "child", "")), ""); err != nil {
		t.Fatal(err)
	}
	child := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "child"}
	other := ctl
	other.Owner = "HelmRelease/shop/other"
	for _, tc := range []struct {
		name string
		p    gate.Principal
	}{{"a writer", admin}, {"another owner's controller", other}} {
		if _, err := e.gate.Release(ctx, tc.p, child); !errors.Is(err, gate.ErrForbidden) && !errors.Is(err, gate.ErrAdoption) {
			t.Errorf("%s released the child: %v", tc.name, err)
		}
	}
	if _, err := e.gate.Release(ctx, ctl, child); err != nil {
		t.Fatal(err)
	}
	ann := e.store.Get(child).GetMetadata().GetAnnotations()
	if ann[gate.AnnotationOwner] != "" || ann[gate.AnnotationAllowAdoption] != "HelmRelease/shop/web" {
		t.Fatalf("released child's annotations %v", ann)
	}
	if _, err := e.gate.Apply(ctx, ctl, decode(t, cm("shop", "child", "")), ""); err != nil {
		t.Fatalf("the former owner adopting its released child: %v", err)
	}
	if got := e.store.Get(child).GetMetadata().GetAnnotations()[gate.AnnotationOwner]; got != "HelmRelease/shop/web" {
		t.Fatalf("owner after the adoption %q", got)
	}
}
