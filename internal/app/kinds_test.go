package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

const widgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - {rule: "self.size <= self.maxSize", message: "size must not exceed maxSize"}
            properties:
              size: {type: integer, minimum: 1, maximum: 100}
              maxSize: {type: integer, default: 10}
              color: {type: string, enum: [red, green, blue], default: blue}
`

func widgetYAML(version, name, spec string) string {
	return "apiVersion: example.com/" + version + "\nkind: Widget\nmetadata: {name: " + name + ", namespace: ns}\nspec: " + spec + "\n"
}

// TestKindsWithSchemas runs a real server: a CustomResourceDefinition
// applied as written for Kubernetes defines its kind; objects that break
// its schema are refused naming the field; defaults are stored; printer
// columns show in `jetplane get`; kinds that are neither built in nor
// defined, and misspelled fields of built-in kinds, are refused with what
// was probably meant.
func TestKindsWithSchemas(t *testing.T) {
	_, c := startApp(t, app.Config{})
	ctx := context.Background()
	mustApply(t, c, widgetsCRD)

	refused := func(name, yaml string, want ...string) {
		t.Helper()
		_, err := c.Apply(ctx, "test.yaml", []byte(yaml), "")
		if err == nil {
			t.Errorf("%s: accepted, want refused with %q", name, want)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", name, err, w)
			}
		}
	}
	refused("out of bounds", widgetYAML("v1", "big", "{size: 1000, maxSize: 2000}"),
		"Widget.example.com/ns/big: spec.size", "should be less than or equal to 100")
	refused("not in enum", widgetYAML("v1", "pink", "{size: 1, color: pink}"), "spec.color", `supported values: "red", "green", "blue"`)
	refused("required", widgetYAML("v1", "empty", "{color: red}"), "spec.size: Required value")
	refused("unknown field", widgetYAML("v1", "typo", "{size: 1, colour: red}"), "spec.colour: unknown field", "did you mean color?")
	refused("CEL rule", widgetYAML("v1", "cel", "{size: 20}"), "size must not exceed maxSize")
	refused("undefined kind", "apiVersion: example.com/v1\nkind: Sprocket\nmetadata: {name: s, namespace: ns}\n",
		"kind Sprocket.example.com is not defined", "CustomResourceDefinition")
	refused("misspelled built-in kind", "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: web, namespace: ns}\nspec: {}\n",
		"Deploymnet", "did you mean Deployment.apps?")
	refused("misspelled built-in field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns}\nspec: {replica: 3}\n",
		"spec.replica: unknown field", "did you mean replicas?")
	refused("misspelled container field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns}\nspec:\n  template:\n    spec:\n      containers: [{name: web, image: web, comand: [serve]}]\n",
		"spec.template.spec.containers[0].comand: unknown field", "did you mean command?")
	for _, name := range []string{"big", "pink", "empty", "typo", "cel"} {
		if _, err := c.Get(ctx, api.Key{Kind: "Widget.example.com", Namespace: "ns", Name: name}); err == nil {
			t.Errorf("refused widget %s was stored", name)
		}
	}

	// Applied at a served version, stored at the storage version, with
	// the schema's defaults.
	mustApply(t, c, widgetYAML("v1alpha1", "small", "{size: 3}")+"---\n"+widgetYAML("v1", "red", "{size: 7, color: red}"))
	raw, err := c.Get(ctx, api.Key{Kind: "widgets", Namespace: "ns", Name: "small"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		APIVersion string         `json:"apiVersion"`
		Spec       map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "example.com/v1" || got.Spec["color"] != "blue" || got.Spec["maxSize"] != 10.0 {
		t.Errorf("stored %s %v; want apiVersion example.com/v1 with color blue and maxSize 10 defaulted", got.APIVersion, got.Spec)
	}

	// Printer columns in `jetplane get`.
	bin := filepath.Join(t.TempDir(), "jetplane")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/jetplane").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "get", "wd", "-n", "ns", "--server", c.BaseURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("jetplane get wd: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 || !strings.Contains(strings.Join(strings.Fields(lines[0]), " "), "KIND NAME SIZE COLOR GOAL") {
		t.Fatalf("jetplane get wd:\n%s\nwant a header with SIZE and COLOR after NAME and two rows", stdout.String())
	}
	for i, want := range [][]string{{"red", "7", "red"}, {"small", "3", "blue"}} {
		if f := strings.Fields(lines[i+1]); len(f) < 5 || f[2] != want[0] || f[3] != want[1] || f[4] != want[2] {
			t.Errorf("row %q: want NAME %s SIZE %s COLOR %s", lines[i+1], want[0], want[1], want[2])
		}
	}
}

// A data directory holding objects of a kind nothing defines keeps
// working after the upgrade: the objects read, their history reads, they
// are updated and deleted; a kind with no objects left is refused.
// The first server defines Legacy by a reconciler compiled into it; the
// second, on the same data directory, does not.
func TestUndefinedKindsAfterUpgrade(t *testing.T) {
	dir := t.TempDir()
	legacy := "apiVersion: v1\nkind: Legacy\nmetadata: {name: %s, namespace: ns}\nspec: {free: %s}\n"
	func() {
		rec := reconcilers.Funcs{KindList: []string{"Legacy"}, ReconcileFunc: func(context.Context, *schemas.Object) (reconcilers.Result, error) {
			return reconcilers.Result{}, nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, err := app.New(ctx, app.Config{DataDir: dir, Listen: "127.0.0.1:0", NATSPort: -1, Reconcilers: []reconcilers.Reconciler{rec},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		c := &api.Client{BaseURL: a.URL()}
		eventuallyApp(t, "the API", func() bool { _, err := c.List(ctx, api.Query{}); return err == nil })
		mustApply(t, c, fmt.Sprintf(legacy, "a", "one")+"---\n"+fmt.Sprintf(legacy, "b", "two"))
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("first server: %v", err)
		}
	}()

	_, c := startApp(t, app.Config{DataDir: dir})
	ctx := context.Background()
	a := api.Key{Kind: "Legacy", Namespace: "ns", Name: "a"}
	if _, err := c.Get(ctx, a); err != nil {
		t.Fatalf("get after the upgrade: %v", err)
	}
	if h, err := c.History(ctx, a); err != nil || len(h.Events) == 0 {
		t.Fatalf("history after the upgrade: %v, %v", h, err)
	}
	if _, err := c.Apply(ctx, "l.yaml", []byte(fmt.Sprintf(legacy, "a", "changed")), ""); err != nil {
		t.Fatalf("update of a grandfathered kind: %v", err)
	}
	if _, err := c.Apply(ctx, "o.yaml", []byte("apiVersion: v1\nkind: Other\nmetadata: {name: o, namespace: ns}\n"), ""); err == nil || !strings.Contains(err.Error(), "kind Other is not defined") {
		t.Fatalf("a new undefined kind: %v", err)
	}
	mustDelete(t, c, a)
	mustDelete(t, c, api.Key{Kind: "Legacy", Namespace: "ns", Name: "b"})
	if h, err := c.History(ctx, a); err != nil || len(h.Events) < 3 {
		t.Fatalf("history after delete: %v, %v", h, err)
	}
	if _, err := c.Apply(ctx, "l.yaml", []byte(fmt.Sprintf(legacy, "a", "again")), ""); err == nil || !strings.Contains(err.Error(), "kind Legacy is not defined") {
		t.Fatalf("a kind with no objects left is no longer grandfathered: %v", err)
	}
}
