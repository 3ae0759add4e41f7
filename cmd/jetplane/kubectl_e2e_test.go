package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// jp runs the binary against url (no server flag when url is empty) and
// returns what it printed and its exit code.
func jp(t *testing.T, bin, url string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if url != "" {
		args = append(args, "--server", url)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("jetplane %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs a command that must succeed and returns its stdout.
func ok(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	r := jp(t, bin, url, args...)
	if r.code != 0 {
		t.Fatalf("jetplane %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func examples(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../deploy/examples")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// widgets defines its kind with a CustomResourceDefinition whose schema
// takes any spec, and applies one object of it.
const widgets = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: c2, namespace: shop, dependsOn: [{kind: Widget.example.com, name: c1}]}
spec: {size: 1}
`

const widgetCycle = `apiVersion: example.com/v1
kind: Widget
metadata: {name: c1, namespace: shop, dependsOn: [{kind: Widget, name: c2}]}
spec: {size: 1}
`

// TestKubectlHabits is issue 12: every friction point of its first
// paragraph, reproduced against a real server, and the kubectl forms the
// issue lists. One server and one binary serve all the subtests, which run
// in order: each builds on the state the ones before left.
func TestKubectlHabits(t *testing.T) {
	bin := buildBinary(t)
	s := serve(t, bin, t.TempDir())
	url := s.url
	dir := t.TempDir()
	ex := examples(t)
	ok(t, bin, url, "apply", "-f", ex)

	t.Run("friction: kind names as kubectl takes them", func(t *testing.T) {
		for _, kind := range []string{"deployments", "deployment", "deploy", "Deployment", "DEPLOY", "deploy.apps", "Deployment.apps"} {
			out := ok(t, bin, url, "get", kind, "-o", "name")
			if strings.TrimSpace(out) != "Deployment.apps/shop/web" {
				t.Errorf("get %s -o name = %q, want Deployment.apps/shop/web", kind, out)
			}
		}
		for _, kind := range []string{"cm", "configmaps", "ConfigMap"} {
			if out := ok(t, bin, url, "get", kind, "-o", "name"); strings.TrimSpace(out) != "ConfigMap/shop/web-settings" {
				t.Errorf("get %s -o name = %q", kind, out)
			}
		}
		if out := ok(t, bin, url, "get", "ns", "-o", "name"); strings.TrimSpace(out) != "Namespace/shop" {
			t.Errorf("get ns = %q", out)
		}
		// A kind jetplane knows, with no objects: kubectl's answer, exit 0.
		r := jp(t, bin, url, "get", "services")
		if r.code != 0 || !strings.Contains(r.stderr, "No objects found.") {
			t.Errorf("get services with none: %s", r)
		}
	})

	t.Run("friction: a typo is an error with suggestions", func(t *testing.T) {
		r := jp(t, bin, url, "get", "Deploymnt")
		if r.code == 0 || !strings.Contains(r.stderr, `unknown kind "Deploymnt"`) || !strings.Contains(r.stderr, "did you mean Deployment.apps") {
			t.Fatalf("get Deploymnt: %s", r)
		}
		if strings.Contains(r.stdout+r.stderr, "No objects found") {
			t.Errorf("a typo still answers as an empty list: %s", r)
		}
	})

	t.Run("friction: delete and history take a bare kind", func(t *testing.T) {
		out := ok(t, bin, url, "history", "Deployment/shop/web")
		if !strings.Contains(out, "Applied") || !strings.Contains(out, "created") {
			t.Errorf("history Deployment/shop/web:\n%s", out)
		}
		if out := ok(t, bin, url, "history", "deploy", "web", "-n", "shop"); !strings.Contains(out, "Applied") {
			t.Errorf("history deploy web -n shop:\n%s", out)
		}
		if out := ok(t, bin, url, "delete", "Deployment/shop/web"); !strings.Contains(out, "Deployment.apps/shop/web deleted") {
			t.Errorf("delete Deployment/shop/web: %s", out)
		}
		if out := ok(t, bin, url, "history", "Deployment/shop/web"); !strings.Contains(out, "DeleteRequested") {
			t.Errorf("history after delete:\n%s", out)
		}
		ok(t, bin, url, "apply", "-f", ex)
	})

	t.Run("friction: a dependsOn cycle through a bare kind is rejected", func(t *testing.T) {
		ok(t, bin, url, "apply", "-f", writeFile(t, dir, "c2.yaml", widgets))
		// c1 does not exist yet: c2's dependency on it is no cycle.
		r := jp(t, bin, url, "apply", "-f", writeFile(t, dir, "c1.yaml", widgetCycle))
		if r.code == 0 || !strings.Contains(r.stderr, "cycle Widget.example.com/shop/c1 → Widget.example.com/shop/c2 → Widget.example.com/shop/c1") {
			t.Fatalf("apply of a cycle written with a bare kind: %s", r)
		}
		if r := jp(t, bin, url, "get", "widget", "c1", "-n", "shop"); r.code != 3 {
			t.Errorf("the rejected Widget was stored: %s", r)
		}
	})

	t.Run("friction: delete -f goes on past missing objects", func(t *testing.T) {
		ok(t, bin, url, "delete", "cm/shop/web-settings")
		r := jp(t, bin, url, "delete", "-f", ex, "--cascade=orphan")
		if r.code != 3 {
			t.Errorf("delete -f with a missing object: exit %d, want 3 (not found)\n%s", r.code, r)
		}
		if !strings.Contains(r.stdout, "Namespace/shop deleted") || !strings.Contains(r.stdout, "Deployment.apps/shop/web deleted") {
			t.Errorf("delete -f stopped at the missing object:\n%s", r)
		}
		if !strings.Contains(r.stderr, "ConfigMap/shop/web-settings") {
			t.Errorf("delete -f does not report the missing object:\n%s", r)
		}
		if r := jp(t, bin, url, "delete", "-f", ex, "--ignore-not-found"); r.code != 0 {
			t.Errorf("delete -f --ignore-not-found of nothing: %s", r)
		}
		ok(t, bin, url, "apply", "-f", ex)
	})

	t.Run("friction: an idempotency key with another body is refused", func(t *testing.T) {
		base := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: idem, namespace: shop}\ndata: {v: '%d'}\n"
		f1 := writeFile(t, dir, "idem1.yaml", fmt.Sprintf(base, 1))
		f2 := writeFile(t, dir, "idem2.yaml", fmt.Sprintf(base, 2))
		ok(t, bin, url, "apply", "-f", f1, "--idempotency-key", "K")
		if out := ok(t, bin, url, "apply", "-f", f1, "--idempotency-key", "K"); !strings.Contains(out, "unchanged") {
			t.Errorf("the same request again: %s", out)
		}
		r := jp(t, bin, url, "apply", "-f", f2, "--idempotency-key", "K")
		if r.code != 1 || !strings.Contains(r.stderr, `key "K" was used for a request with another`) || strings.Contains(r.stdout, "configured") {
			t.Fatalf("same key, changed body: %s", r)
		}
		if out := ok(t, bin, url, "get", "cm", "idem", "-n", "shop", "-o", "jsonpath={.spec.data.v}"); strings.TrimSpace(out) != "1" {
			t.Errorf("stored v = %q, want the first body's 1", out)
		}
		// Over HTTP the refusal is a 422.
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/apply", strings.NewReader(fmt.Sprintf(base, 3)))
		req.Header.Set("Idempotency-Key", "K")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || !json.Valid(body) {
			t.Errorf("HTTP: %d %s, want 422 with a JSON error", resp.StatusCode, body)
		}
	})

	t.Run("friction: -o wide and -o name, and errors that list real choices", func(t *testing.T) {
		out := ok(t, bin, url, "get", "cm", "-o", "wide")
		for _, col := range []string{"GROUP", "DEPENDSON", "RECONCILER", "none (stored only)", "Namespace/shop"} {
			if !strings.Contains(out, col) {
				t.Errorf("get -o wide lacks %q:\n%s", col, out)
			}
		}
		r := jp(t, bin, url, "get", "-o", "xml")
		if r.code != 2 || strings.Contains(r.stderr, `"",`) || strings.Contains(r.stderr, "one of ,") || !strings.Contains(r.stderr, "wide, name") {
			t.Errorf("get -o xml: %s", r)
		}
		r = jp(t, bin, url, "history", "cm/shop/idem", "-o", "xml")
		if r.code != 2 || strings.Contains(r.stderr, "one of ,") {
			t.Errorf("history -o xml lists an empty choice: %s", r)
		}
	})

	t.Run("friction: why PHASE stays -", func(t *testing.T) {
		r := jp(t, bin, url, "get", "cm")
		if r.code != 0 || !strings.Contains(r.stderr, "PHASE is - for ConfigMap: stored only, no reconciler writes status") {
			t.Errorf("get cm says nothing about PHASE: %s", r)
		}
		out := ok(t, bin, url, "describe", "cm/shop/web-settings")
		if !strings.Contains(out, "no reconciler: stored only") {
			t.Errorf("describe:\n%s", out)
		}
		// A Deployment has its controller: kubectl's columns, no hint.
		r = jp(t, bin, url, "get", "deploy")
		if r.code != 0 || strings.Contains(r.stderr, "stored only") || !strings.Contains(r.stdout, "UP-TO-DATE") || !strings.Contains(r.stdout, "0/3") {
			t.Errorf("get deploy: %s", r)
		}
		if out := ok(t, bin, url, "describe", "deploy/shop/web"); strings.Contains(out, "no reconciler") {
			t.Errorf("describe deploy:\n%s", out)
		}
	})

	t.Run("friction: commands against no server fail fast; watch retries visibly", func(t *testing.T) {
		dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		for _, args := range [][]string{{"get"}, {"get", "cm", "x"}, {"apply", "-f", ex}, {"delete", "cm/shop/x"}, {"history", "cm/shop/x"},
			{"describe", "cm/shop/x"}, {"diff", "-f", ex}, {"state", "--at", "1"}, {"version"}, {"api-resources"}, {"clusters"},
			{"logs", "hello"}, {"image", "ls"}, {"explain", "Pod/default/x"}, {"backup", filepath.Join(t.TempDir(), "b")}} {
			start := time.Now()
			r := jp(t, bin, dead, args...)
			if r.code == 0 || !strings.Contains(r.stderr, "cannot reach the jetplane server at "+dead) {
				t.Errorf("%v against no server: %s", args, r)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("%v took %s to fail", args, d)
			}
		}
		cmd := exec.Command(bin, "watch", "--server", dead)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(stderr).ReadString('\n')
		if err != nil || !strings.Contains(line, "cannot reach the jetplane server") || !strings.Contains(line, "retrying every 1s") {
			t.Fatalf("watch's first message: %q, %v", line, err)
		}
		if cmd.ProcessState != nil {
			t.Errorf("watch gave up: %v", cmd.ProcessState)
		}
	})

	t.Run("get forms", func(t *testing.T) {
		if out := ok(t, bin, url, "get", "deploy", "web", "-n", "shop", "-o", "yaml"); !strings.Contains(out, "replicas: 3") {
			t.Errorf("get deploy web -n shop -o yaml:\n%s", out)
		}
		// Without -n one object is found in whichever namespace holds it.
		if out := ok(t, bin, url, "get", "deploy", "web", "-o", "name"); strings.TrimSpace(out) != "Deployment.apps/shop/web" {
			t.Errorf("get deploy web = %q", out)
		}
		if out := ok(t, bin, url, "get", "deploy/shop/web", "-o", "json"); !json.Valid([]byte(out)) || !strings.Contains(out, `"replicas": 3`) {
			t.Errorf("get deploy/shop/web -o json:\n%s", out)
		}
		if out := ok(t, bin, url, "get", "deploy/web", "-n", "shop", "-o", "name"); strings.TrimSpace(out) != "Deployment.apps/shop/web" {
			t.Errorf("get deploy/web -n shop = %q", out)
		}
		if out := ok(t, bin, url, "get", "cm", "-A", "-l", "app=web", "-o", "name"); strings.TrimSpace(out) != "ConfigMap/shop/web-settings" {
			t.Errorf("get cm -A -l app=web = %q", out)
		}
		if r := jp(t, bin, url, "get", "cm", "-A", "-n", "shop"); r.code != 2 {
			t.Errorf("-A with -n: %s", r)
		}
		if out := ok(t, bin, url, "get", "cm", "--field-selector", "metadata.name=idem", "-o", "name"); strings.TrimSpace(out) != "ConfigMap/shop/idem" {
			t.Errorf("--field-selector metadata.name=idem = %q", out)
		}
		if out := ok(t, bin, url, "get", "cm", "--field-selector", "metadata.name!=idem,metadata.namespace=shop", "-o", "name"); strings.TrimSpace(out) != "ConfigMap/shop/web-settings" {
			t.Errorf("--field-selector != = %q", out)
		}
		if r := jp(t, bin, url, "get", "cm", "--field-selector", "spec.x=1"); r.code == 0 || !strings.Contains(r.stderr, "status.phase") {
			t.Errorf("an unsupported field: %s", r)
		}
		if out := ok(t, bin, url, "get", "cm", "-o", "jsonpath={.items[*].metadata.name}"); strings.TrimSpace(out) != "idem web-settings" {
			t.Errorf("jsonpath = %q", out)
		}
		out := ok(t, bin, url, "get", "cm,deploy", "-o", "custom-columns=NAME:.metadata.name,KIND:.kind", "--sort-by", ".metadata.name", "--no-headers")
		if f := strings.Fields(out); len(f) == 0 || f[0] != "idem" || !strings.Contains(out, "web-settings   ConfigMap") || strings.Contains(out, "NAME") {
			t.Errorf("custom-columns sorted, no headers:\n%s", out)
		}
		if out := ok(t, bin, url, "get", "cm", "--show-labels"); !strings.Contains(out, "LABELS") || !strings.Contains(out, "app=web") {
			t.Errorf("--show-labels:\n%s", out)
		}
		if r := jp(t, bin, url, "get", "cm", "nope", "-n", "shop"); r.code != 3 || !strings.Contains(r.stderr, "not found") {
			t.Errorf("get of a missing object: %s", r)
		}
	})

	t.Run("get -w lines up its columns", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "get", "cm", "-n", "shop", "-w", "--server", url)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var got []string
		read := func(n int) {
			t.Helper()
			deadline := time.After(30 * time.Second)
			for len(got) < n {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("get -w ended; printed:\n%s", strings.Join(got, "\n"))
					}
					got = append(got, l)
				case <-deadline:
					t.Fatalf("get -w printed %d lines, want %d:\n%s", len(got), n, strings.Join(got, "\n"))
				}
			}
		}
		read(3) // header, idem, web-settings
		ok(t, bin, url, "apply", "-f", writeFile(t, dir, "long.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-much-longer-name, namespace: shop}\n"))
		ok(t, bin, url, "delete", "cm/shop/idem")
		read(5)
		col := strings.Index(got[0], "NAME ")
		goal := strings.Index(got[0], "GOAL")
		for _, l := range got[1:] {
			if !regexp.MustCompile(`^\S`).MatchString(l[col:]) || l[col-1] != ' ' {
				t.Errorf("NAME column (at %d) not aligned:\n%s", col, strings.Join(got, "\n"))
			}
			if l[goal-1] != ' ' || l[goal] == ' ' {
				t.Errorf("GOAL column (at %d) not aligned:\n%s", goal, strings.Join(got, "\n"))
			}
		}
	})

	t.Run("watch shows each change's type", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "watch", "cm", "-n", "shop", "--server", url)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		br := bufio.NewReader(out)
		header, _ := br.ReadString('\n')
		row, _ := br.ReadString('\n')
		if !strings.HasPrefix(header, "TYPE ") || !strings.Contains(header, "NAMESPACE") || !strings.HasPrefix(row, "ADDED ") {
			t.Errorf("watch printed %q then %q", header, row)
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := ok(t, bin, url, "describe", "cm", "web-settings", "-n", "shop")
		for _, want := range []string{"Name:                web-settings", "Kind:                ConfigMap", "LOG_LEVEL: info", "Conditions:",
			"DependsOn:", "Namespace/shop", "Dependents:", "Deployment.apps/shop/web", "Events:", "Applied", "Reconciled by:"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("diff -f and apply --dry-run write nothing", func(t *testing.T) {
		before := ok(t, bin, url, "get", "-o", "json")
		if r := jp(t, bin, url, "diff", "-f", ex); r.code != 0 || r.stdout != "" {
			t.Errorf("diff of what is stored: %s", r)
		}
		changed := strings.Replace(readFile(t, filepath.Join(ex, "03-deployment.yaml")), "replicas: 3", "replicas: 5", 1)
		f := writeFile(t, dir, "deploy.yaml", changed)
		r := jp(t, bin, url, "diff", "-f", f)
		if r.code != 1 || !strings.Contains(r.stdout, "--- live/Deployment.apps/shop/web") || !strings.Contains(r.stdout, "-  replicas: 3\n+  replicas: 5") {
			t.Errorf("diff of a change: %s", r)
		}
		if out := ok(t, bin, url, "apply", "-f", f, "--dry-run"); !strings.Contains(out, "Deployment.apps/shop/web configured (dry run)") {
			t.Errorf("apply --dry-run: %s", out)
		}
		cyc := writeFile(t, dir, "cyc.yaml", strings.Replace(widgetCycle, "dependsOn: [{kind: Widget, name: c2}]", "dependsOn: [{kind: Widget, name: c2}]", 1))
		if r := jp(t, bin, url, "apply", "-f", cyc, "--dry-run"); r.code == 0 || !strings.Contains(r.stderr, "cycle") {
			t.Errorf("apply --dry-run of a cycle: %s", r)
		}
		if after := ok(t, bin, url, "get", "-o", "json"); after != before {
			t.Errorf("a dry run changed state")
		}
	})

	t.Run("history DETAIL, --diff and -o json", func(t *testing.T) {
		changed := strings.Replace(readFile(t, filepath.Join(ex, "03-deployment.yaml")), "replicas: 3", "replicas: 4", 1)
		ok(t, bin, url, "apply", "-f", writeFile(t, dir, "deploy4.yaml", changed))
		out := ok(t, bin, url, "history", "deploy/shop/web")
		if !strings.Contains(out, "DETAIL") || !strings.Contains(out, "spec.replicas: 3→4") {
			t.Errorf("history DETAIL:\n%s", out)
		}
		out = ok(t, bin, url, "history", "deploy/shop/web", "--diff")
		if !strings.Contains(out, "-  replicas: 3\n+  replicas: 4") {
			t.Errorf("history --diff:\n%s", out)
		}
		var h struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal([]byte(ok(t, bin, url, "history", "deploy/shop/web", "-o", "json")), &h); err != nil || len(h.Items) < 2 {
			t.Errorf("history -o json: %v %v", err, h)
		}
	})

	t.Run("delete forms and a Namespace's cascade", func(t *testing.T) {
		ok(t, bin, url, "apply", "-f", writeFile(t, dir, "more.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: l1, namespace: shop, labels: {tier: x}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: l2, namespace: shop, labels: {tier: x}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: o1, namespace: other}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: o2, namespace: other}
`))
		if out := ok(t, bin, url, "delete", "cm", "-l", "tier=x", "-n", "shop"); !strings.Contains(out, "l1 deleted") || !strings.Contains(out, "l2 deleted") {
			t.Errorf("delete -l: %s", out)
		}
		if r := jp(t, bin, url, "delete", "cm", "--all"); r.code != 2 {
			t.Errorf("delete --all without -n: %s", r)
		}
		if out := ok(t, bin, url, "delete", "cm", "--all", "-n", "other"); !strings.Contains(out, "o1 deleted") || !strings.Contains(out, "o2 deleted") {
			t.Errorf("delete --all -n other: %s", out)
		}
		if r := jp(t, bin, url, "delete", "cm/other/o1"); r.code != 3 {
			t.Errorf("delete of a missing object: %s", r)
		}
		if r := jp(t, bin, url, "delete", "cm/other/o1", "--ignore-not-found"); r.code != 0 {
			t.Errorf("--ignore-not-found: %s", r)
		}
		// The Namespace shop with its contents: the Deployment before the
		// ConfigMap it depends on, the Namespace last.
		out := ok(t, bin, url, "delete", "ns", "shop", "--wait")
		d, c, n := strings.Index(out, "Deployment.apps/shop/web deleted"), strings.Index(out, "ConfigMap/shop/web-settings deleted"), strings.Index(out, "Namespace/shop deleted")
		if d < 0 || c < 0 || n < 0 || !(d < c && c < n) {
			t.Errorf("delete ns shop, want the Deployment, then its ConfigMap, then the Namespace:\n%s", out)
		}
		if r := jp(t, bin, url, "get", "-n", "shop", "-o", "name"); strings.TrimSpace(r.stdout) != "" {
			t.Errorf("left in shop: %s", r)
		}
		ok(t, bin, url, "apply", "-f", ex)
		if out := ok(t, bin, url, "delete", "ns", "shop", "--cascade=orphan"); strings.Contains(out, "ConfigMap") {
			t.Errorf("--cascade=orphan deleted contents: %s", out)
		}
		if out := ok(t, bin, url, "get", "-n", "shop", "-o", "name"); !strings.Contains(out, "ConfigMap/shop/web-settings") {
			t.Errorf("--cascade=orphan: contents gone: %s", out)
		}
	})

	t.Run("version, api-resources, completion, exit codes", func(t *testing.T) {
		out := ok(t, bin, url, "version")
		for _, want := range []string{"Client Version:", "Server Version:", "16 partitions", "1 replica", "durability: fsync every 2m0s", "Idempotency keys kept: 2m0s"} {
			if !strings.Contains(out, want) {
				t.Errorf("version lacks %q:\n%s", want, out)
			}
		}
		out = ok(t, bin, url, "api-resources")
		for _, re := range []string{`deployments\s+deploy\s+apps\s+true\s+Deployment\s+1\s+reconciler/Deployment.apps`, `configmaps\s+cm\s+-\s+true\s+ConfigMap`, `pods\s+po\s`, `nodes\s+no\s`, `helmreleases\s+hr\s`, `namespaces\s+ns\s+-\s+false`, `secrets\s`, `applies\s`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("api-resources lacks %s:\n%s", re, out)
			}
		}
		out = ok(t, bin, "", "__complete", "--server", url, "get", "")
		for _, want := range []string{"Deployment.apps", "ConfigMap", "Widget.example.com"} {
			if !strings.Contains(out, want) {
				t.Errorf("completion of kinds lacks %s:\n%s", want, out)
			}
		}
		if out := ok(t, bin, "", "__complete", "--server", url, "get", "cm", "-n", "shop", "web"); !strings.Contains(out, "web-settings") {
			t.Errorf("completion of names:\n%s", out)
		}
		if out := ok(t, bin, "", "__complete", "--server", url, "history", "deploy/"); !strings.Contains(out, "deploy/shop/web") {
			t.Errorf("completion of references:\n%s", out)
		}
		if out := ok(t, bin, "", "completion", "bash"); !strings.Contains(out, "__start_jetplane") {
			t.Errorf("completion bash: %.200s", out)
		}
		for _, tt := range []struct {
			args []string
			code int
		}{
			{[]string{"get", "--no-such-flag"}, 2},
			{[]string{"no-such-command"}, 2},
			{[]string{"history"}, 2},
			{[]string{"get", "cm/shop/none"}, 3},
			{[]string{"history", "cm/shop/never"}, 3},
			{[]string{"get", "nosuchkind"}, 1},
		} {
			if r := jp(t, bin, url, tt.args...); r.code != tt.code {
				t.Errorf("%v: exit %d, want %d\n%s", tt.args, r.code, tt.code, r)
			}
		}
	})

	t.Run("API: JSON errors on every path, watch ids from the first event", func(t *testing.T) {
		for _, tt := range []struct {
			method, path string
			code         int
		}{
			{"GET", "/nope", 404}, {"GET", "/v1/nope", 404}, {"PUT", "/v1/objects", 405}, {"POST", "/v1/object", 405},
			{"GET", "/v1/objects?kind=Deploymnt", 400}, {"GET", "/v1/object?kind=cm&namespace=shop&name=none", 404},
		} {
			req, _ := http.NewRequest(tt.method, url+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != tt.code || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Error == "" {
				t.Errorf("%s %s: %d %q %s, want %d with a JSON error", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.code)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/watch?kind=cm", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ids []string
		for sc.Scan() && len(ids) < 1 {
			if id, found := strings.CutPrefix(sc.Text(), "id: "); found {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 || ids[0] == "0" {
			t.Errorf("the first watch event's id is %v, want its resourceVersion", ids)
		}
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
