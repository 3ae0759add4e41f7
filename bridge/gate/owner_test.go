package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

const relYAML = "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec: {chart: {name: web, version: 0.1.0}}\n"

func cm(ns, name, extraMeta string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + extraMeta + "}\ndata: {a: b}\n"
}

// The gate keeps the scope and owner annotations itself, and a controller
// writes only what its owner owns, within its owner's scope.
func TestGateOwnershipAndScope(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	shop := gate.Principal{Name: "user/shopci", Role: gate.RoleWriter, Namespaces: []string{"shop"}}

	// A confined writer's object carries its scope; forged gate
	// annotations are replaced.
	forged := cm("shop", "rel-values", ", annotations: {gate.jetplane.dev/scope: '*', gate.jetplane.dev/owner: HelmRelease/other/x}")
	if _, err := e.gate.Apply(ctx, shop, decode(t, forged+"---\n"+relYAML), ""); err != nil {
		t.Fatal(err)
	}
	cmKey := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "rel-values"}
	ann := e.store.Get(cmKey).GetMetadata().GetAnnotations()
	if ann[gate.AnnotationScope] != "shop" || ann[gate.AnnotationOwner] != "" {
		t.Fatalf("annotations %v: want scope shop and no owner", ann)
	}
	rel := e.store.Get(projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "web"})
	ctl := gate.Controller("reconciler/HelmRelease", rel)
	if ctl.Owner != "HelmRelease/shop/web" || len(ctl.Namespaces) != 1 || ctl.Namespaces[0] != "shop" {
		t.Fatalf("controller principal %+v", ctl)
	}

	// Its children: in scope, marked as the release's.
	if _, err := e.gate.Apply(ctx, ctl, decode(t, cm("shop", "child", "")), ""); err != nil {
		t.Fatal(err)
	}
	child := e.store.Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "child"})
	if got := child.GetMetadata().GetAnnotations()[gate.AnnotationOwner]; got != "HelmRelease/shop/web" {
		t.Fatalf("child owner %q", got)
	}
	// A user's apply over the child keeps its owner.
	if _, err := e.gate.Apply(ctx, shop, decode(t, cm("shop", "child", ", labels: {x: y}")), ""); err != nil {
		t.Fatal(err)
	}
	if got := e.store.Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "child"}).GetMetadata().GetAnnotations()[gate.AnnotationOwner]; got != "HelmRelease/shop/web" {
		t.Fatalf("child owner after a user's apply: %q", got)
	}

	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"out of scope", func() error { _, err := e.gate.Apply(ctx, ctl, decode(t, cm("other", "cfg", "")), ""); return err }, gate.ErrForbidden},
		{"cluster scope", func() error {
			_, err := e.gate.Apply(ctx, ctl, decode(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: evil}\n"), "")
			return err
		}, gate.ErrForbidden},
		{"adopt a user's object", func() error {
			_, err := e.gate.Apply(ctx, ctl, decode(t, cm("shop", "rel-values", "")), "")
			return err
		}, gate.ErrAdoption},
		{"delete a user's object", func() error { _, err := e.gate.Delete(ctx, ctl, cmKey, ""); return err }, gate.ErrAdoption},
		{"Apply into another namespace", func() error {
			_, err := e.gate.Apply(ctx, shop, decode(t, "apiVersion: v1\nkind: Apply\nmetadata: {name: a, namespace: shop}\nspec:\n  cluster: east\n  manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg, namespace: other}}\n"), "")
			return err
		}, gate.ErrForbidden},
		{"namespaced Node", func() error {
			_, err := e.gate.Apply(ctx, gate.Admin("user/root"), decode(t, "apiVersion: v1\nkind: Node\nmetadata: {name: local, namespace: shop}\n"), "")
			return err
		}, gate.ErrInvalid},
		{"Secret without a key", func() error {
			_, err := e.gate.Apply(ctx, ctl, decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop}\nstringData: {a: b}\n"), "")
			return err
		}, gate.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count(t)
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after := e.count(t); after != before {
				t.Fatalf("the log grew from %d to %d events", before, after)
			}
		})
	}

	// Allowed by its writer, the object is adopted.
	allowed := cm("shop", "rel-values", ", annotations: {"+gate.AnnotationAllowAdoption+": HelmRelease/shop/web}")
	if _, err := e.gate.Apply(ctx, shop, decode(t, allowed), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.Apply(ctx, ctl, decode(t, cm("shop", "rel-values", "")), ""); err != nil {
		t.Fatalf("adoption allowed: %v", err)
	}
	var o *schemas.Object = e.store.Get(cmKey)
	if got := o.GetMetadata().GetAnnotations()[gate.AnnotationOwner]; got != "HelmRelease/shop/web" {
		t.Fatalf("adopted object's owner %q", got)
	}
	if _, err := e.gate.Delete(ctx, ctl, cmKey, ""); err != nil {
		t.Fatalf("delete an adopted child: %v", err)
	}
}
