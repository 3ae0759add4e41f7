package main_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/testenv"
)

// passwordChart keeps a generated password as charts commonly do: the
// Secret's previous value, found by lookup, or a new random one. A
// ConfigMap carries its checksum, as a Deployment's annotation would.
var passwordChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: vault\nversion: 0.1.0\n",
	"templates/_pw.tpl": `{{- define "vault.password" -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace "vault-auth" -}}
{{- if and $old $old.data -}}{{ $old.data.password }}{{- else -}}{{ randAlphaNum 24 | b64enc }}{{- end -}}
{{- end -}}`,
	"templates/secret.yaml": `{{- $pw := include "vault.password" . -}}
apiVersion: v1
kind: Secret
metadata:
  name: vault-auth
data:
  password: {{ $pw }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: vault-config
data:
  mode: {{ .Values.mode | quote }}
  passwordChecksum: {{ $pw | sha256sum }}
`,
}

const passwordRelease = `apiVersion: v1
kind: HelmRelease
metadata: {name: vault, namespace: apps}
spec:
  chart: {name: vault, version: 0.1.0}
  releaseNamespace: shop
  values: {mode: MODE}
`

// TestHelmGeneratedPasswordSurvives: a password a chart generates is drawn
// once. Five upgrades (which find it by lookup), a rollback and two
// restarts of serve keep it, and the restarts write nothing.
func TestHelmGeneratedPasswordSurvives(t *testing.T) {
	bin := buildBinary(t)
	data := t.TempDir()
	s := serve(t, bin, data)
	run(t, bin, s, "chart", "push", testenv.ChartDir(t, passwordChart), "vault:0.1.0")
	waitFor := func(s *server, what string, args []string, want string) string {
		t.Helper()
		return waitOutput(t, bin, s, what, args, want)
	}
	checksum := func(s *server) string {
		t.Helper()
		var cm struct {
			Spec struct{ Data map[string]string }
		}
		if err := json.Unmarshal([]byte(run(t, bin, s, "get", "ConfigMap", "vault-config", "-n", "shop", "-o", "json")), &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Spec.Data["passwordChecksum"]
	}
	release := func(s *server, rev int, mode string) {
		t.Helper()
		waitFor(s, fmt.Sprintf("revision %d", rev), []string{"get", "HelmRelease", "vault", "-n", "apps", "-o", "yaml"}, fmt.Sprintf("revision %d: chart vault 0.1.0", rev))
		waitFor(s, "mode "+mode, []string{"get", "ConfigMap", "vault-config", "-n", "shop", "-o", "yaml"}, "mode: "+mode+"\n")
	}
	var first string
	for rev := 1; rev <= 6; rev++ {
		mode := fmt.Sprintf("m%d", rev)
		applyText(t, bin, s, strings.Replace(passwordRelease, "MODE", mode, 1))
		release(s, rev, mode)
		switch got := checksum(s); {
		case rev == 1 && len(got) == 64:
			first = got
		case got != first:
			t.Fatalf("revision %d: password checksum %q, revision 1's %q", rev, got, first)
		}
	}
	run(t, bin, s, "rollback", "HelmRelease/apps/vault", "--to-revision", "2")
	release(s, 7, "m2")
	if got := checksum(s); got != first {
		t.Fatalf("after five upgrades and a rollback the password changed: checksum %s, first %s", got, first)
	}
	events := func(s *server) string {
		var out []string
		for _, k := range []string{"Secret/shop/vault-auth", "ConfigMap/shop/vault-config", "HelmRelease/apps/vault"} {
			var h struct{ Items []json.RawMessage }
			if err := json.Unmarshal([]byte(run(t, bin, s, "history", k, "-o", "json")), &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s: %d events", k, len(h.Items)))
		}
		return strings.Join(out, ", ")
	}
	// Let the release settle (its last status written) before counting.
	waitFor(s, "ready", []string{"get", "HelmRelease", "vault", "-n", "apps", "-o", "yaml"}, `revision 7: chart vault 0.1.0; values: .mode "m6" → "m2"; 2/2 children Ready`)
	before := events(s)
	for range 2 {
		s.stop(t)
		s = serve(t, bin, data)
		waitFor(s, "ready after a restart", []string{"get", "HelmRelease", "vault", "-n", "apps", "-o", "yaml"}, `revision 7: chart vault 0.1.0; values: .mode "m6" → "m2"; 2/2 children Ready`)
		// The restarted instance runs every release as it takes its
		// partitions: for the time a rewrite takes to show, the counts
		// must not move.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			if after := events(s); after != before {
				t.Fatalf("a restart wrote events:\n before %s\n after  %s", before, after)
			}
		}
		if got := checksum(s); got != first {
			t.Fatalf("a restart changed the password: checksum %s, first %s", got, first)
		}
	}
}

// TestHelmResourcePolicyKeep: the keep chart's object annotated
// helm.sh/resource-policy: keep stays when an upgrade stops rendering it
// and when the release is deleted, while the others go, as helm leaves
// them (TestHelmKeepsResourcePolicyKeep in internal/render runs the same
// chart through the helm library).
func TestHelmResourcePolicyKeep(t *testing.T) {
	bin := buildBinary(t)
	s := serve(t, bin, t.TempDir())
	run(t, bin, s, "chart", "push", filepath.Join("..", "..", "internal", "render", "testdata", "charts", "keep"), "keep:0.1.0")
	apply := func(extra bool) {
		t.Helper()
		applyText(t, bin, s, fmt.Sprintf("apiVersion: v1\nkind: HelmRelease\nmetadata: {name: rel, namespace: apps}\nspec:\n  chart: {name: keep, version: 0.1.0}\n  releaseNamespace: shop\n  values: {extra: %t}\n", extra))
	}
	names := func() string {
		var list struct {
			Items []struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal([]byte(run(t, bin, s, "get", "ConfigMap", "-n", "shop", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range list.Items {
			out = append(out, i.Metadata.Name)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	waitNames := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for got := names(); got != want; got = names() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ConfigMaps %q, want %q", what, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	apply(true)
	waitNames("installed", "always dropped kept")
	apply(false)
	waitNames("upgraded without the extra objects", "always kept")
	run(t, bin, s, "delete", "HelmRelease/apps/rel")
	waitNames("the release deleted", "kept")
}
