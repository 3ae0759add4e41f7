package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/testenv"
)

var cliChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"values.yaml": "mode: slow\n",
	"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  mode: {{ .Values.mode | quote }}
`,
	"templates/hook.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: migrate
  annotations: {"helm.sh/hook": pre-install}
`,
}

const cliRelease = `apiVersion: v1
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  chart: {name: web, version: 0.1.0}
  releaseNamespace: shop
  values: {mode: MODE}
`

// waitOutput runs the command args against s until its output holds
// want, and returns that output.
func waitOutput(t *testing.T, bin string, s *server, what string, args []string, want string) string {
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

// applyText applies manifests given as text with `jetplane apply -f`.
func applyText(t *testing.T, bin string, s *server, text string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", file)
}

// TestHelmCommands drives chart push, template, history and rollback
// through the real binary.
func TestHelmCommands(t *testing.T) {
	bin := buildBinary(t)

	// template needs no server.
	dir := testenv.ChartDir(t, cliChart)
	out, err := runErr(bin, &server{url: "http://127.0.0.1:1"}, "template", "web", dir, "-n", "shop", "--set", "mode=fast")
	if err != nil || !strings.Contains(out, "name: web-settings") || !strings.Contains(out, "mode: fast") ||
		!strings.Contains(out, "group: helmrelease.shop.web") || strings.Contains(out, "migrate") {
		t.Fatalf("template: %v\n%s", err, out)
	}
	out, err = runErr(bin, &server{url: "http://127.0.0.1:1"}, "template", "web", dir, "--cluster", "prod")
	if err != nil || !strings.Contains(out, "kind: Apply") || !strings.Contains(out, "cluster: prod") {
		t.Fatalf("template --cluster: %v\n%s", err, out)
	}

	s := serve(t, bin, t.TempDir())
	if out := run(t, bin, s, "chart", "push", dir, "web:0.1.0"); !strings.Contains(out, "chart web:0.1.0 pushed") {
		t.Fatalf("chart push: %s", out)
	}
	run(t, bin, s, "chart", "push", dir, "web:0.1.0") // the same bytes again: fine
	other := testenv.ChartDir(t, map[string]string{"Chart.yaml": cliChart["Chart.yaml"], "templates/cm.yaml": cliChart["templates/configmap.yaml"]})
	if out, err := runErr(bin, s, "chart", "push", other, "web:0.1.0"); err == nil || !strings.Contains(out, "already exists with other content") {
		t.Fatalf("pushing other content under a pushed version: %v\n%s", err, out)
	}
	big := filepath.Join(t.TempDir(), "big.tgz")
	if err := os.WriteFile(big, make([]byte, 5<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runErr(bin, s, "chart", "push", big, "big:1.0.0"); err == nil || !strings.Contains(out, "chart too large") {
		t.Fatalf("pushing a chart over the limit: %v\n%s", err, out)
	}

	applyMode := func(mode string) { applyText(t, bin, s, strings.Replace(cliRelease, "MODE", mode, 1)) }
	waitFor := func(what string, args []string, want string) string {
		t.Helper()
		return waitOutput(t, bin, s, what, args, want)
	}
	applyMode("fast")
	waitFor("revision 1", []string{"get", "HelmRelease", "web", "-n", "apps", "-o", "yaml"}, "revision 1: chart web 0.1.0; 1/1 children Ready")
	applyMode("faster")
	waitFor("revision 2", []string{"get", "ConfigMap", "web-settings", "-n", "shop", "-o", "yaml"}, "mode: faster")
	waitFor("the values change in the history", []string{"history", "HelmRelease/apps/web"}, "spec.values.mode: fast→faster")
	waitFor("the values diff in the history's statuses", []string{"history", "HelmRelease/apps/web", "-o", "json"}, `values: .mode \"fast\" → \"faster\"`)
	// The pre-install hook ran, as helm runs it, and stays.
	out = waitFor("the hook run", []string{"get", "ConfigMap", "migrate", "-n", "shop", "-o", "yaml"}, "helm.sh/hook: pre-install")
	if !strings.Contains(out, "jetplane.dev/template: web/templates/hook.yaml:1") {
		t.Fatalf("hook object: %s", out)
	}

	if out := run(t, bin, s, "rollback", "HelmRelease/apps/web", "--to-revision", "1"); !strings.Contains(out, "rolled back to revision 1 (configured)") {
		t.Fatalf("rollback: %s", out)
	}
	waitFor("the rollback", []string{"get", "ConfigMap", "web-settings", "-n", "shop", "-o", "yaml"}, "mode: fast\n")
	waitFor("revision 3 in the history", []string{"history", "HelmRelease/apps/web", "-o", "json"}, `revision 3: chart web 0.1.0; values: .mode \"faster\" → \"fast\"`)
	if out, err := runErr(bin, s, "rollback", "HelmRelease/apps/web", "--to-revision", "9"); err == nil || !strings.Contains(out, "revision 9 is not in the release's history (revisions: [1 2 3])") {
		t.Fatalf("rollback to a missing revision: %v\n%s", err, out)
	}

	// Backup while serving, restore into a fresh directory, serve there:
	// the same history.
	backup := filepath.Join(t.TempDir(), "jp.backup")
	run(t, bin, s, "backup", backup)
	hist := run(t, bin, s, "history", "HelmRelease/apps/web", "-o", "json")
	s.stop(t)
	fresh := t.TempDir()
	if out, err := exec.Command(bin, "restore", backup, "--data", fresh).CombinedOutput(); err != nil || !strings.Contains(string(out), "restored") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	s2 := serve(t, bin, fresh)
	// The restarted release runs again (every key is enqueued when an
	// instance takes its partitions) and may add a status: the restored
	// history starts with the original, event for event.
	var before, after struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(hist), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(run(t, bin, s2, "history", "HelmRelease/apps/web", "-o", "json")), &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Items) < len(before.Items) {
		t.Fatalf("restored history has %d events, the original %d", len(after.Items), len(before.Items))
	}
	for i := range before.Items {
		if string(before.Items[i]) != string(after.Items[i]) {
			t.Fatalf("restored event %d:\n%s\nwant\n%s", i, after.Items[i], before.Items[i])
		}
	}
}
