package main_test

import (
	"strings"
	"testing"

	"github.com/jetplane/jetplane/internal/testenv"
)

// jobsChart runs its hooks on jetplane's own node: a pre-install Job that
// must complete before the release's ConfigMap is written, test Pods
// (one that fails when asked to), and, when asked, a pre-upgrade hook
// jetplane cannot run itself (a Pod mounting a configMap volume).
var jobsChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: jobs\nversion: 0.1.0\n",
	"values.yaml": "broken: false\nunrunnable: false\n",
	"templates/app.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  broken: {{ .Values.broken | quote }}
`,
	"templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: pre-install
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: "hello:v1", args: ["-n", "1"]}
`,
	"templates/tests.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: smoke
  annotations:
    helm.sh/hook: test
spec:
  restartPolicy: Never
  containers:
  - {name: smoke, image: "hello:v1", args: ["-n", "1"]}
{{- if .Values.broken }}
---
apiVersion: v1
kind: Pod
metadata:
  name: broken
  annotations:
    helm.sh/hook: test
    helm.sh/hook-weight: "1"
spec:
  restartPolicy: Never
  containers:
  - {name: broken, image: "hello:v1", args: ["-no-such-flag"]}
{{- end }}
{{- if .Values.unrunnable }}
---
apiVersion: v1
kind: Pod
metadata:
  name: mounts
  annotations:
    helm.sh/hook: pre-upgrade
spec:
  restartPolicy: Never
  volumes:
  - {name: cfg, configMap: {name: app}}
  containers:
  - {name: m, image: "hello:v1"}
{{- end }}
`,
}

const jobsRelease = `apiVersion: v1
kind: HelmRelease
metadata: {name: jobs, namespace: apps}
spec:
  chart: {name: jobs, version: 0.1.0}
  releaseNamespace: shop
  values: VALUES
`

// TestHelmHooksOnJetplaneNodes: a release of jetplane objects runs its
// hook Job on jetplane's node and writes its objects only once the Job
// completed; `jetplane helm test` runs the test Pods there and reports as
// helm test does, failing when one fails; a hook jetplane cannot run
// fails the revision before anything of it runs, and is named.
func TestHelmHooksOnJetplaneNodes(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	s := serve(t, bin, t.TempDir(), "--node=true")
	run(t, bin, s, "image", "push", module, "hello:v1")
	run(t, bin, s, "chart", "push", testenv.ChartDir(t, jobsChart), "jobs:0.1.0")

	applyText(t, bin, s, strings.Replace(jobsRelease, "VALUES", "{}", 1))
	waitOutput(t, bin, s, "revision 1", []string{"get", "HelmRelease", "jobs", "-n", "apps", "-o", "yaml"}, "revision 1: chart jobs 0.1.0; 1/1 children Ready")
	job := waitOutput(t, bin, s, "the hook Job", []string{"get", "Job", "migrate", "-n", "shop", "-o", "yaml"}, "phase: Complete")
	if !strings.Contains(job, "helm.sh/hook: pre-install") {
		t.Fatalf("hook Job:\n%s", job)
	}
	// The Job completed before the release's ConfigMap was written.
	jobDone, cmWritten := firstSeq(t, bin, s, "Job/shop/migrate", "Complete"), firstSeq(t, bin, s, "ConfigMap/shop/app", "Applied")
	if jobDone == 0 || cmWritten == 0 || jobDone > cmWritten {
		t.Fatalf("the Job completed at #%d, the ConfigMap was written at #%d: want the Job first", jobDone, cmWritten)
	}

	out, err := runErr(bin, s, "helm", "test", "HelmRelease/apps/jobs")
	if err != nil || !strings.Contains(out, "TEST SUITE:     Pod/shop/smoke") || !strings.Contains(out, "Phase:          Succeeded") ||
		!strings.Contains(out, "STATUS: deployed\nREVISION: 1") {
		t.Fatalf("helm test: %v\n%s", err, out)
	}

	applyText(t, bin, s, strings.Replace(jobsRelease, "VALUES", "{broken: true}", 1))
	waitOutput(t, bin, s, "revision 2", []string{"get", "HelmRelease", "jobs", "-n", "apps", "-o", "yaml"}, "revision 2: chart jobs 0.1.0")
	out, err = runErr(bin, s, "helm", "test", "jobs", "-n", "apps")
	if err == nil || !strings.Contains(out, "TEST SUITE:     Pod/shop/broken") || !strings.Contains(out, "Phase:          Failed") ||
		!strings.Contains(out, "1 test(s) failed: Pod/shop/broken") {
		t.Fatalf("helm test with a failing test: %v\n%s", err, out)
	}

	applyText(t, bin, s, strings.Replace(jobsRelease, "VALUES", "{unrunnable: true}", 1))
	out = waitOutput(t, bin, s, "the unrunnable hook named", []string{"get", "HelmRelease", "jobs", "-n", "apps", "-o", "yaml"}, "phase: Failed")
	if !strings.Contains(out, "revision 3: hooks jetplane cannot run: jobs/templates/tests.yaml:") || !strings.Contains(out, "Pod/shop/mounts (pre-upgrade): jetplane cannot run this hook itself") ||
		!strings.Contains(out, "spec.cluster runs it in Kubernetes") {
		t.Fatalf("unrunnable hook:\n%s", out)
	}
}

// firstSeq is the sequence of the first event in k's history whose line
// in `jetplane history` holds want; 0 when none does.
func firstSeq(t *testing.T, bin string, s *server, k, want string) int {
	t.Helper()
	for _, line := range strings.Split(run(t, bin, s, "history", k), "\n") {
		if !strings.Contains(line, want) {
			continue
		}
		var seq int
		for _, f := range strings.Fields(line) {
			if n, ok := atoi(f); ok {
				seq = n
				break
			}
		}
		return seq
	}
	return 0
}

func atoi(s string) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, s != ""
}

// TestHelmHookSurvivesRestart: serve stops while a pre-install hook Job
// runs; after the restart the release goes on from its recorded stage:
// the Job is not made again, and the release's objects follow it.
func TestHelmHookSurvivesRestart(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	data := t.TempDir()
	s := serve(t, bin, data, "--node=true")
	run(t, bin, s, "image", "push", module, "hello:v1")
	chart := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: slow\nversion: 0.1.0\n",
		"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: b\n",
		"templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: pre-install
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: "hello:v1", args: ["-n", "40", "-every", "100ms"]}
`,
	}
	run(t, bin, s, "chart", "push", testenv.ChartDir(t, chart), "slow:0.1.0")
	applyText(t, bin, s, "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: slow, namespace: apps}\nspec:\n  chart: {name: slow, version: 0.1.0}\n  releaseNamespace: shop\n")
	waitOutput(t, bin, s, "the hook running", []string{"get", "HelmRelease", "slow", "-n", "apps", "-o", "yaml"},
		"running pre-install hook slow/templates/migrate.yaml:1: Job.batch/shop/migrate (1 of 1)")
	if out, err := runErr(bin, s, "get", "ConfigMap", "app", "-n", "shop"); err == nil {
		t.Fatalf("the release's ConfigMap written while its pre-install hook runs:\n%s", out)
	}
	s.stop(t)
	s = serve(t, bin, data, "--node=true")
	waitOutput(t, bin, s, "revision 1 after the restart", []string{"get", "HelmRelease", "slow", "-n", "apps", "-o", "yaml"}, "revision 1: chart slow 0.1.0; 1/1 children Ready")
	hist := run(t, bin, s, "history", "Job/shop/migrate")
	if n := strings.Count(hist, "created"); n != 1 || strings.Contains(hist, "exists→deleted") {
		t.Fatalf("the hook Job was made %d times (or deleted):\n%s", n, hist)
	}
}
