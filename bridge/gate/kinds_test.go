package gate_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
)

const gadgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: MAX}
              color: {type: string, default: blue}
`

// The kinds in effect come from the CRDs the projection holds: a change
// to a CRD applies to the next write, an undefined kind is refused unless
// objects of it are already in use, and a refused request writes nothing.
func TestKindCheck(t *testing.T) {
	e := newEnv(t)
	// Objects written before kinds were checked.
	e.apply(t, "user/test", "apiVersion: example.com/v1\nkind: Legacy\nmetadata: {name: old, namespace: ns}\nspec: {free: form}\n", "")

	kc := gate.NewKindCheck(e.store, nil)
	g, err := gate.New(gate.Config{Log: e.log, State: e.store, Admit: kc.Admit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	apply := func(yaml string) error {
		t.Helper()
		_, err := g.Apply(ctx, gate.Admin("user/test"), decode(t, yaml), "")
		return err
	}
	gadget := "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: ns}\nspec: {size: 5}\n"

	if err := apply(gadget); err == nil || !errors.Is(err, gate.ErrInvalid) || !strings.Contains(err.Error(), "kind Gadget.example.com is not defined") {
		t.Fatalf("undefined kind: %v", err)
	}
	if err := apply("apiVersion: example.com/v1\nkind: Legacy\nmetadata: {name: new, namespace: ns}\nspec: {any: thing}\n"); err != nil {
		t.Fatalf("a kind in use is grandfathered: %v", err)
	}
	if err := apply(strings.Replace(gadgetsCRD, "MAX", "10", 1)); err != nil {
		t.Fatal(err)
	}
	if err := apply(gadget); err != nil {
		t.Fatal(err)
	}
	if got := e.store.Get(projections.Key{Kind: "Gadget.example.com", Namespace: "ns", Name: "g"}); got.GetSpec().GetFields()["color"].GetStringValue() != "blue" {
		t.Fatalf("default not stored: %v", got.GetSpec())
	}
	// Re-applying the manifest as written changes nothing: the stored
	// object carries the defaults the new one gets again.
	if out, err := g.Apply(ctx, gate.Admin("user/test"), decode(t, gadget), ""); err != nil || out[0].Action != gate.Unchanged {
		t.Fatalf("re-apply: %v, %v; want unchanged", out, err)
	}
	// A stricter CRD applies to the next write.
	if err := apply(strings.Replace(gadgetsCRD, "MAX", "3", 1)); err != nil {
		t.Fatal(err)
	}
	before := e.count(t)
	if err := apply(gadget + "---\n" + configMap("other", "", "a: b")); err == nil || !strings.Contains(err.Error(), "spec.size: Invalid value: 5") {
		t.Fatalf("after the CRD changed: %v", err)
	}
	if e.count(t) != before {
		t.Fatal("a refused request wrote events")
	}
	if _, err := g.DryRun(ctx, gate.Admin("user/test"), decode(t, gadget)); err == nil {
		t.Fatal("dry run accepted what apply refuses")
	}
}
