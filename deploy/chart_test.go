package deploy

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

const (
	chartDir  = "chart/jetplane"
	namespace = "jetplane"
)

// renderChart renders the chart with the values files given (over the
// chart's values.yaml) through helm's own library, as helm template does.
func renderChart(t *testing.T, valueFiles ...string) []*unstructured.Unstructured {
	t.Helper()
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	// As an installer must: the chart refuses an API without tokens.
	vals := map[string]any{"api": map[string]any{"tokenSecret": "jetplane-tokens"}}
	for _, f := range valueFiles {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatal(err)
		}
		vals = chartutil.MergeTables(v.AsMap(), vals)
		if f == "values-ha.yaml" {
			// As an installer must: the chart refuses open routes.
			vals = chartutil.MergeTables(map[string]any{"nats": map[string]any{"embedded": map[string]any{"routeSecret": "jetplane-routes"}}}, vals)
		}
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, _ := chartutil.ParseKubeVersion("v1.36.3")
	caps.KubeVersion = *kv
	caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1")
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "jp", Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		t.Fatalf("render %v: %v", valueFiles, err)
	}
	delete(files, "jetplane/templates/NOTES.txt") // text, not a manifest (helm drops it too)
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) > 0 {
		t.Fatalf("the chart has hooks: %v", hooks)
	}
	var out []*unstructured.Unstructured
	for _, m := range manifests {
		u := &unstructured.Unstructured{}
		j, err := yaml.YAMLToJSON([]byte(m.Content))
		if err == nil {
			err = json.Unmarshal(j, &u.Object)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", m.Name, err, m.Content)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	slices.Sort(out)
	return out
}

// podSpec returns the pod template's spec of a StatefulSet or Deployment.
func podSpec(t *testing.T, o *unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	m, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	var ps corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestChartRenders(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		workload     string
		replicas     int
		wantArgs     []string
		wantKinds    []string
	}{
		{"default", "", "StatefulSet", 1, []string{"--replicas=1", "--data=/data", "--clusters=/etc/jetplane/clusters.yaml"},
			[]string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "NetworkPolicy", "Service", "Service", "Service", "ServiceAccount", "StatefulSet"}},
		{"ha", "values-ha.yaml", "StatefulSet", 3, []string{"--replicas=3", "--nats-name=$(POD_NAME)", "--nats-cluster=jetplane",
			"--nats-routes=nats://jp-jetplane-0.jp-jetplane-nats.jetplane.svc:6222,nats://jp-jetplane-1.jp-jetplane-nats.jetplane.svc:6222,nats://jp-jetplane-2.jp-jetplane-nats.jetplane.svc:6222",
			"--nats-route-secret-file=/etc/jetplane/nats-routes/secret"},
			[]string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "NetworkPolicy", "PodDisruptionBudget", "Service", "Service", "Service", "ServiceAccount", "ServiceMonitor", "StatefulSet"}},
		{"external", "values-external.yaml", "Deployment", 3, []string{"--nats-url=nats://nats-0.nats:4222,nats://nats-1.nats:4222,nats://nats-2.nats:4222",
			"--replicas=3", "--nats-creds=/etc/jetplane/nats/creds", "--nats-ca=/etc/jetplane/nats-tls/ca.crt", "--token-file=/etc/jetplane/tokens/tokens"},
			[]string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []string
			if tc.values != "" {
				files = append(files, tc.values)
			}
			objs := renderChart(t, files...)
			if got := kinds(objs); !slices.Equal(got, tc.wantKinds) {
				t.Fatalf("kinds:\n got %v\nwant %v", got, tc.wantKinds)
			}
			w := find(objs, tc.workload)[0]
			if r, _, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "replicas"); r != float64(tc.replicas) {
				t.Errorf("replicas %v, want %d", r, tc.replicas)
			}
			ps := podSpec(t, w)
			c := ps.Containers[0]
			for _, a := range tc.wantArgs {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args lack %s: %v", a, c.Args)
				}
			}
			if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
				t.Errorf("pod security context: %+v", sc)
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
				t.Errorf("container security context: %+v", sc)
			}
			if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources: %+v", c.Resources)
			}
			// Least privilege: the watch role only reads; only the apply
			// role writes, and only the listed resources.
			for _, cr := range find(objs, "ClusterRole") {
				rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
				for _, r := range rules {
					verbs := r.(map[string]any)["verbs"].([]any)
					res := r.(map[string]any)["resources"].([]any)
					if slices.Contains(res, any("*")) || slices.Contains(verbs, any("*")) {
						t.Errorf("%s: wildcard rule %v", cr.GetName(), r)
					}
					if strings.HasSuffix(cr.GetName(), "-watch") && len(verbs) != 3 {
						t.Errorf("%s writes: %v", cr.GetName(), verbs)
					}
				}
			}
		})
	}
}

// TestChartDryRun sends every object the chart renders, with each values
// file, to a real kube-apiserver as a server-side dry-run: the apiserver's
// own validation accepts them all.
func TestChartDryRun(t *testing.T) {
	env := kubeenv.Start(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installServiceMonitorCRD(t, env)
	dc, err := discovery.NewDiscoveryClientForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range [][]string{nil, {"values-ha.yaml"}, {"values-external.yaml"}} {
		objs := renderChart(t, values...)
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%v %s: %v", values, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == "namespace" {
				ri = dyn.Resource(m.Resource).Namespace(namespace)
			}
			_, err = ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Errorf("values %v: dry-run of %s %s: %v", values, gvk.Kind, o.GetName(), err)
			}
		}
		t.Logf("values %v: %d objects accepted by a server-side dry-run", values, len(objs))
	}
}

// installServiceMonitorCRD installs a minimal ServiceMonitor CRD: the test
// apiserver has no Prometheus operator, and a dry-run of a ServiceMonitor
// needs its kind to exist.
func installServiceMonitorCRD(t *testing.T, env *kubeenv.Env) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}},
			}},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	if _, err := dyn.Resource(res).Create(t.Context(), &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait until the apiserver serves the new kind.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := dyn.Resource(res).Get(t.Context(), crd.Name, metav1.GetOptions{})
		if err == nil && established(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServiceMonitor CRD not established: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// Without API tokens the chart does not render (every caller of an open
// API on the pod network would be admin), unless anonymous access is
// asked for by name.
func TestChartRefusesAnOpenAPI(t *testing.T) {
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	render := func(vals map[string]any) (map[string]string, error) {
		rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "jp", Namespace: namespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		return engine.Render(c, rv)
	}
	if _, err := render(map[string]any{}); err == nil || !strings.Contains(err.Error(), "api.tokenSecret is required") {
		t.Fatalf("render without tokens: %v, want a refusal naming api.tokenSecret", err)
	}
	files, err := render(map[string]any{"api": map[string]any{"allowAnonymous": true}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(files["jetplane/templates/statefulset.yaml"], "--allow-anonymous") {
		t.Fatal("allowAnonymous did not pass --allow-anonymous to jetplane serve")
	}
}

// With more than one replica the embedded servers form a cluster whose
// routes are trusted beyond every credential: the chart does not render
// them without a route secret, and mounts the one it is given.
func TestChartRefusesOpenRoutes(t *testing.T) {
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	render := func(embedded map[string]any) (map[string]string, error) {
		vals := map[string]any{"api": map[string]any{"tokenSecret": "t"}, "nats": map[string]any{"embedded": embedded}}
		rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "jp", Namespace: namespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		return engine.Render(c, rv)
	}
	if _, err := render(map[string]any{"replicas": 3}); err == nil || !strings.Contains(err.Error(), "nats.embedded.routeSecret is required") {
		t.Fatalf("render of three replicas without a route secret: %v, want a refusal naming nats.embedded.routeSecret", err)
	}
	files, err := render(map[string]any{"replicas": 3, "routeSecret": "my-routes"})
	if err != nil {
		t.Fatal(err)
	}
	sts := files["jetplane/templates/statefulset.yaml"]
	for _, want := range []string{"--nats-route-secret-file=/etc/jetplane/nats-routes/secret", "secretName: my-routes"} {
		if !strings.Contains(sts, want) {
			t.Errorf("statefulset lacks %q", want)
		}
	}
	// One replica has no routes, so needs no secret.
	if _, err := render(map[string]any{"replicas": 1}); err != nil {
		t.Fatalf("one replica: %v", err)
	}
}
