package app_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

const good = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: ns}\ndata: {a: b}\n"

// hostile lists manifests the API must reject, each with a phrase the error
// must contain. Every one is sent together with a valid document, so the
// test also proves a bad batch writes nothing of its good part.
var hostile = []struct {
	name, doc, want string
}{
	{"broken indentation", "apiVersion: v1\nkind: ConfigMap\n metadata:\n  name: x\n", "document 2"},
	{"unclosed quote", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"x}\n", "document 2"},
	{"tab indentation", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n", "document 2"},
	{"not a mapping", "- just\n- a list\n", "document 2"},
	{"plain text", "hello world\n", "document 2"},
	{"name is a number", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 42}\n", "metadata.name"},
	{"labels is a list", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: [a, b]}\n", "metadata.labels"},
	{"spec is a string", "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: hello\n", "spec: must be a mapping"},
	{"metadata is a list", "apiVersion: v1\nkind: ConfigMap\nmetadata: [name, x]\n", "metadata: must be a mapping"},
	{"dependsOn is a map", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, dependsOn: {kind: A}}\n", "metadata.dependsOn"},
	{"label value is a map", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {a: {b: c}}}\n", "metadata.labels.a"},
	{"upper-case name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Web}\n", "metadata.name: \"Web\" is not a valid name"},
	{"underscore in name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: my_app}\n", "is not a valid name"},
	{"name too long", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + strings.Repeat("a", 254) + "}\n", "metadata.name"},
	{"empty name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"\"}\n", "metadata.name"},
	{"name starts with dash", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: -x}\n", "metadata.name"},
	{"bad namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a.b}\n", "metadata.namespace"},
	{"bad label key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {\"-bad\": v}}\n", "metadata.labels"},
	{"bad label value", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {a: \"has space\"}}\n", "metadata.labels.a"},
	{"oversize", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: \"" + strings.Repeat("x", 1<<20) + "\"}\n", "MiB"},
	{"alias bomb", "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "alias"},
	{"deep nesting", "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n", "nest"},
	{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: x}\n", "kind"},
	{"unknown top-level field", "apiVersion: v1\nkind: Deployment\nmetadata: {name: x}\nreplicas: 3\n", "unknown field \"replicas\""},
	{"unknown metadata field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, owner: bob}\n", "unknown field \"owner\""},
	{"missing apiVersion", "kind: ConfigMap\nmetadata: {name: x}\n", "apiVersion"},
	{"missing kind", "apiVersion: v1\nmetadata: {name: x}\n", "kind"},
	{"missing metadata", "apiVersion: v1\nkind: ConfigMap\n", "metadata: is required"},
	{"missing name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: ns}\n", "metadata.name"},
	{"lower-case kind", "apiVersion: v1\nkind: configMap\nmetadata: {name: x}\n", "not a valid kind"},
	{"depends on itself", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns, dependsOn: [{kind: ConfigMap, name: x}]}\n", "depends on itself"},
	{"dependsOn without name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, dependsOn: [{kind: ConfigMap}]}\n", "dependsOn[0].name"},
	{"same object twice", good, "document"},
	{"integer too large", "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: {n: 123456789012345678901}\n", "spec.n"},
	{"binary tag", "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: {b: !!binary aGVsbG8=}\n", "spec.b"},
	{"bad apiVersion", "apiVersion: a/b/c\nkind: ConfigMap\nmetadata: {name: x}\n", "apiVersion"},
	{"dependsOn cycle", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: ns, dependsOn: [{kind: ConfigMap, name: c2}]}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2, namespace: ns, dependsOn: [{kind: ConfigMap, name: c1}]}\n", "cycle ConfigMap/ns/c1 → ConfigMap/ns/c2 → ConfigMap/ns/c1"},
	{"cycle through stored object", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base, namespace: ns, dependsOn: [{kind: ConfigMap, name: top}]}\n", "cycle"},
}

// TestBadInputIsRejectedAndLogUnchanged sends every hostile manifest through
// the HTTP API and counts the log's events before and after.
func TestBadInputIsRejectedAndLogUnchanged(t *testing.T) {
	a, c := startApp(t, app.Config{})
	ctx := context.Background()
	// Stored objects for the cycle that closes through current state.
	seed := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base, namespace: ns}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: top, namespace: ns, dependsOn: [{kind: ConfigMap, name: base}]}\n"
	if _, err := c.Apply(ctx, "seed.yaml", []byte(seed), ""); err != nil {
		t.Fatal(err)
	}
	before, err := a.Log().Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hostile) < 30 {
		t.Fatalf("only %d hostile manifests; the contract is at least 30", len(hostile))
	}
	for _, tt := range hostile {
		t.Run(tt.name, func(t *testing.T) {
			body := good + "---\n" + tt.doc
			_, err := c.Apply(ctx, "bad.yaml", []byte(body), "")
			var apiErr *api.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("apply succeeded or failed without an API error: %v", err)
			}
			if apiErr.Code != http.StatusBadRequest && apiErr.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 400", apiErr.Code)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error does not name the problem (want %q):\n%v", tt.want, err)
			}
			t.Log(err)
		})
	}
	// The wrong body types are refused too.
	for _, body := range []string{"", "   \n", "\x00\x01\x02"} {
		if _, err := c.Apply(ctx, "empty", []byte(body), ""); err == nil {
			t.Errorf("apply of %q succeeded", body)
		}
	}
	after, err := a.Log().Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the log grew from %d to %d events while every apply was rejected", before, after)
	}
	t.Logf("%d hostile manifests rejected; log unchanged at %d events", len(hostile), after)
}
