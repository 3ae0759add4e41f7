package app_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// step is one kubectl command run against both servers.
type step struct {
	name  string
	stdin string
	args  []string
}

// managedTimes hides when each manager last wrote.
var managedTimes = regexp.MustCompile(`(?m)^(\s*)time: .*\n`)

// compareSteps runs each step against jetplane and kube-apiserver and
// reports where what kubectl prints, or whether it succeeds, differs.
func compareSteps(t *testing.T, jet, kube kubectl, steps []step) {
	t.Helper()
	for _, st := range steps {
		jo, jok := jet.run(st.stdin, st.args...)
		ko, kok := kube.run(st.stdin, st.args...)
		jn := managedTimes.ReplaceAllString(normalize(jo), "")
		kn := managedTimes.ReplaceAllString(normalize(ko), "")
		if strings.Contains(strings.Join(st.args, " "), "managedFields[*]") {
			// Entries are ordered by operation, then by time to the second,
			// then by manager: two writes within one second order by name
			// on either server. Their set is what is compared.
			jn, kn = sortedFields(jn), sortedFields(kn)
		}
		if jok != kok || jn != kn {
			t.Errorf("kubectl %s (%s):\njetplane (ok %v):\n%s\nkube-apiserver (ok %v):\n%s", strings.Join(st.args, " "), st.name, jok, jo, kok, ko)
		}
	}
}

func sortedFields(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}

// bothServers starts jetplane and kube-apiserver and returns kubectl for
// each.
func bothServers(t *testing.T) (jet, kube kubectl) {
	t.Helper()
	bin := kubectlBin(t)
	a, caPEM := startTLSApp(t, app.Config{Tokens: map[string]string{"tok-alice": "alice"}})
	jet = kubectl{t: t, bin: bin, kubeconfig: jetplaneKubeconfig(t, a.URL(), "tok-alice", caPEM)}
	env := kubeenv.Start(t)
	return jet, kubectl{t: t, bin: bin, kubeconfig: env.Kubeconfig()}
}

const ssaConfig = `apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop}
data: {color: blue, size: "3"}
`

// TestKubectlServerSideApplyConflicts compares server-side apply's field
// ownership with kube-apiserver's: managedFields, a conflict with another
// manager, --force-conflicts, and a field its only manager stops applying.
func TestKubectlServerSideApplyConflicts(t *testing.T) {
	jet, kube := bothServers(t)
	other := strings.Replace(ssaConfig, "color: blue", "color: red", 1)
	steps := []step{
		{"namespace", "", []string{"create", "namespace", "shop"}},
		{"apply creates", ssaConfig, []string{"apply", "--server-side", "-f", "-"}},
		{"managers", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.metadata.managedFields[*].manager} {.metadata.managedFields[*].operation}"}},
		{"managed fields", "", []string{"get", "cm", "web", "-n", "shop", "-o", "yaml", "--show-managed-fields"}},
		{"apply unchanged", ssaConfig, []string{"apply", "--server-side", "-f", "-"}},
		{"another manager conflicts", other, []string{"apply", "--server-side", "--field-manager=other", "-f", "-"}},
		{"nothing changed", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data}"}},
		{"forced", other, []string{"apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"}},
		{"after force", "", []string{"get", "cm", "web", "-n", "shop", "-o", "yaml", "--show-managed-fields"}},
		{"a field left by its only manager is removed", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata: {color: red}\n", []string{"apply", "--server-side", "-f", "-"}},
		{"after removal", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data}"}},
		{"an update takes ownership", "", []string{"patch", "cm", "web", "-n", "shop", "--type=merge", "-p", `{"data":{"color":"green"}}`}},
		{"patch manager", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.metadata.managedFields[*].manager}"}},
		{"apply conflicts with the update", other, []string{"apply", "--server-side", "--field-manager=other", "-f", "-"}},
		{"dry run", ssaConfig, []string{"apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-"}},
		{"after dry run", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data}"}},
	}
	compareSteps(t, jet, kube, steps)
}

const ssaDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "registry.example/web:1"}
      - {name: side, image: "registry.example/side:1"}
`

// TestKubectlServerSideApplyLists compares field ownership inside a list
// with keys (a Deployment's containers, by name), which only the typed
// schemas of built-in kinds tell.
func TestKubectlServerSideApplyLists(t *testing.T) {
	jet, kube := bothServers(t)
	image2 := strings.Replace(ssaDeployment, "web:1", "web:2", 1)
	steps := []step{
		{"namespace", "", []string{"create", "namespace", "shop"}},
		{"apply creates", ssaDeployment, []string{"apply", "--server-side", "-f", "-"}},
		{"fields", "", []string{"get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.metadata.managedFields[0].fieldsV1}"}},
		{"one container's image conflicts", image2, []string{"apply", "--server-side", "--field-manager=ci", "-f", "-"}},
		{"forced", image2, []string{"apply", "--server-side", "--field-manager=ci", "--force-conflicts", "-f", "-"}},
		{"images", "", []string{"get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.spec.template.spec.containers[*].image}"}},
		{"ownership", "", []string{"get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.metadata.managedFields[*].manager}"}},
	}
	compareSteps(t, jet, kube, steps)
}

const scalableWidgets = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
`

const widgetW1 = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {replicas: 1}
status: {replicas: 9}
`

// waitFor runs kubectl until it succeeds, for at most 30 seconds.
func waitFor(t *testing.T, k kubectl, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, ok := k.run("", args...)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl %s: %s", strings.Join(args, " "), out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKubectlSubresources compares the status and scale subresources with
// kube-apiserver's: kubectl scale, get --subresource, a status write that
// leaves the spec and a spec write that leaves the status.
func TestKubectlSubresources(t *testing.T) {
	jet, kube := bothServers(t)
	for _, k := range []kubectl{jet, kube} {
		k.ok("", "create", "namespace", "shop")
		k.ok(scalableWidgets, "apply", "-f", "-")
		waitFor(t, k, "get", "widgets", "-n", "shop")
	}
	steps := []step{
		{"deployment", ssaDeployment, []string{"apply", "-f", "-"}},
		{"scale a deployment", "", []string{"scale", "deploy", "web", "-n", "shop", "--replicas=3"}},
		{"replicas", "", []string{"get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.spec.replicas}"}},
		{"scale subresource", "", []string{"get", "deploy", "web", "-n", "shop", "--subresource=scale", "-o", "jsonpath={.kind} {.apiVersion} {.spec.replicas} {.status.selector}"}},
		{"status subresource", "", []string{"get", "deploy", "web", "-n", "shop", "--subresource=status", "-o", "jsonpath={.kind} {.spec.replicas}"}},
		{"scale with a precondition that fails", "", []string{"scale", "deploy", "web", "-n", "shop", "--current-replicas=2", "--replicas=4"}},
		{"widget: status in a write of the object is dropped", widgetW1, []string{"apply", "-f", "-"}},
		{"no status", "", []string{"get", "widget", "w1", "-n", "shop", "-o", "jsonpath={.spec.replicas}/{.status}"}},
		{"a status write leaves the spec", "", []string{"patch", "widget", "w1", "-n", "shop", "--subresource=status", "--type=merge", "-p", `{"spec":{"replicas":7},"status":{"replicas":2,"selector":"app=w"}}`}},
		{"after the status write", "", []string{"get", "widget", "w1", "-n", "shop", "-o", "jsonpath={.spec.replicas}/{.status.replicas}/{.status.selector}"}},
		{"a write of the object leaves the status", "", []string{"patch", "widget", "w1", "-n", "shop", "--type=merge", "-p", `{"spec":{"replicas":3},"status":{"replicas":8}}`}},
		{"after the object write", "", []string{"get", "widget", "w1", "-n", "shop", "-o", "jsonpath={.spec.replicas}/{.status.replicas}"}},
		{"scale a widget", "", []string{"scale", "widget", "w1", "-n", "shop", "--replicas=5"}},
		{"widget scale", "", []string{"get", "widget", "w1", "-n", "shop", "--subresource=scale", "-o", "jsonpath={.spec.replicas} {.status.replicas} {.status.selector}"}},
		{"widget status", "", []string{"get", "widget", "w1", "-n", "shop", "--subresource=status", "-o", "jsonpath={.spec.replicas} {.status.replicas}"}},
		{"no scale on a configmap", "", []string{"get", "--raw", "/api/v1/namespaces/shop/configmaps/x/scale"}},
		{"who scaled", "", []string{"get", "deploy", "web", "-n", "shop", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource} {end}"}},
		{"an apply conflicts with kubectl scale", strings.Replace(ssaDeployment, "replicas: 1", "replicas: 2", 1), []string{"apply", "--server-side", "--field-manager=ci", "-f", "-"}},
		{"a widget applied server-side by another manager", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nspec: {replicas: 9}\n", []string{"apply", "--server-side", "--field-manager=ci", "-f", "-"}},
		{"forced", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nspec: {replicas: 9}\n", []string{"apply", "--server-side", "--field-manager=ci", "--force-conflicts", "-f", "-"}},
		{"widget owners", "", []string{"get", "widget", "w1", "-n", "shop", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource}: {.fieldsV1} {end}"}},
		{"status applied server-side conflicts", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nstatus: {replicas: 4}\n", []string{"apply", "--server-side", "--subresource=status", "--field-manager=ctl", "-f", "-"}},
		{"status applied server-side", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nstatus: {replicas: 4}\n", []string{"apply", "--server-side", "--subresource=status", "--field-manager=ctl", "--force-conflicts", "-f", "-"}},
		{"after the status apply", "", []string{"get", "widget", "w1", "-n", "shop", "-o", "yaml", "--show-managed-fields"}},
	}
	compareSteps(t, jet, kube, steps)
}
