package manifest

import (
	"strings"
	"testing"
)

// Built-in kinds are decoded strictly into their k8s.io/api types, and a
// problem is reported at its true path with what was probably meant.
func TestDecodeBuiltinStrict(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		wantErr     string // "" = valid
	}{
		{"deployment replica", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replica: 3}\n",
			"test.yaml, document 1: spec.replica: unknown field; did you mean replicas?"},
		{"container comand", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: i, comand: [x]}]\n",
			"spec.template.spec.containers[0].comand: unknown field; did you mean command?"},
		{"pod comand", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: 'm:1', comand: [x]}]\n",
			"spec.containers[0].comand: unknown field; did you mean command?"},
		{"pod rules still hold", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n  containers: [{name: c, image: 'm:1'}]\n",
			"spec.hostNetwork: is not supported"},
		{"list item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n  data: {a: 1}\n",
			"items[0].data.a: must be a string, got number"},
		{"secret data not base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: hunter2!}\n",
			"data.password: must be base64-encoded"},
		{"secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: aHVudGVyMg==}\nstringData: {user: me}\n", ""},
		{"version not served", "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: i}\nspec: {}\n", ""},
		{"old apps version", "apiVersion: apps/v1beta2\nkind: Deployment\nmetadata: {name: i}\nspec: {replicas: 1}\n",
			`apiVersion: "apps/v1beta2" does not serve Deployment; use apps/v1`},
		{"custom kind taken as written", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {anything: [1]}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("test.yaml", []byte(tc.input))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Decode = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
