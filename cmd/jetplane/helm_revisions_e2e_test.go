package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: vault-auth
data:
  password: {{ include "vault.password" . }}
`,
	"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: vault-config
data:
  mode: {{ .Values.mode | quote }}
  passwordChecksum: {{ include "vault.password" . | sha256sum }}
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
	file := filepath.Join(t.TempDir(), "release.yaml")
	waitFor := func(s *server, what string, args []string, want string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := runErr(bin, s, args...)
			if err == nil && strings.Contains(out, want) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: last output:\n%s", what, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
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
		if err := os.WriteFile(file, []byte(strings.Replace(passwordRelease, "MODE", mode, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, bin, s, "apply", "-f", file)
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
