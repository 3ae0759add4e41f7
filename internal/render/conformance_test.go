//go:build unix

package render_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/internal/render"
	kube "github.com/jetplane/jetplane/internal/testenv/kube"
)

// helmEnv runs the helm library itself against the test kube-apiserver,
// so each conformance chart is compared with what helm install does.
type helmEnv struct {
	kube *kube.Env
}

func (h helmEnv) config(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc := h.kube.Kubeconfig()
	flags.KubeConfig = &kc
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "memory", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// install runs helm install and returns the objects it created, read back
// from the apiserver, by "Kind/namespace/name".
func (h helmEnv) install(t *testing.T, cfg *action.Configuration, c *chart.Chart, name, ns string, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = name, ns, true
	in.Timeout = 0
	rel, err := in.RunWithContext(context.Background(), c, values)
	if err != nil {
		return nil, err
	}
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, info := range resources {
		if err := info.Get(); err != nil {
			t.Fatal(err)
		}
		u := info.Object.(*unstructured.Unstructured)
		out[liveKey(u.GetKind(), u.GetNamespace(), u.GetName())] = u.Object
	}
	return out, nil
}

func liveKey(kind, ns, name string) string {
	if ns == "" {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}

func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(filepath.Join("testdata", "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// subset reports the first field of want that got lacks or holds
// otherwise: the apiserver adds fields (uid, defaults), never drops them.
func subset(path string, want, got any) string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(fmt.Sprint(want), fmt.Sprint(got)) {
			return fmt.Sprintf("%s: jetplane %#v, helm %#v", path, want, got)
		}
		return ""
	}
	gm, _ := got.(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(wm)) {
		if d := subset(path+"."+k, wm[k], gm[k]); d != "" {
			return d
		}
	}
	return ""
}

// TestConformanceWithHelm renders each chart of testdata/charts with
// jetplane and installs it with the helm library into the test
// kube-apiserver: the objects, and every field jetplane renders, must be
// the objects and fields helm created; a chart helm refuses, jetplane
// refuses with helm's message.
func TestConformanceWithHelm(t *testing.T) {
	h := helmEnv{kube: kube.Start(t)}
	for _, tc := range []struct {
		chart string
		check func(t *testing.T, res *render.Result)
	}{
		{"rbac", nil},
		{"separator", func(t *testing.T, res *render.Result) {
			if len(res.Objects) != 2 {
				t.Fatalf("want first and second, got %d objects", len(res.Objects))
			}
		}},
		{"list", nil},
		{"dupkeys", func(t *testing.T, res *render.Result) {
			if got := res.Objects[0].Manifest["data"].(map[string]any)["mode"]; got != "last" {
				t.Fatalf("a duplicate key: %v, want the last", got)
			}
		}},
		{"keepnewline", func(t *testing.T, res *render.Result) {
			if got := res.Objects[0].Manifest["data"].(map[string]any)["script"]; got != "echo one\necho two\n" {
				t.Fatalf("|+ block: %q", got)
			}
		}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			c := loadChart(t, tc.chart)
			ns := "conf-" + tc.chart
			res, err := render.Render(c, render.Options{ReleaseName: "rel", Namespace: ns})
			if err != nil {
				t.Fatalf("jetplane: %v", err)
			}
			live, err := h.install(t, h.config(t, ns), loadChart(t, tc.chart), "rel", ns, nil)
			if err != nil {
				t.Fatalf("helm install: %v", err)
			}
			var mine []string
			for _, o := range res.Objects {
				kind := o.Manifest["kind"].(string)
				md := o.Manifest["metadata"].(map[string]any)
				k := liveKey(kind, fmt.Sprint(md["namespace"]), md["name"].(string))
				if md["namespace"] == nil {
					k = liveKey(kind, "", md["name"].(string))
				}
				mine = append(mine, k)
				got, ok := live[k]
				if !ok {
					continue
				}
				if d := subset(k, o.Manifest, got); d != "" {
					t.Errorf("%s", d)
				}
			}
			slices.Sort(mine)
			helms := slices.Sorted(maps.Keys(live))
			if !slices.Equal(mine, helms) {
				t.Fatalf("objects:\njetplane %v\n    helm %v", mine, helms)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
	t.Run("missingdep", func(t *testing.T) {
		c := loadChart(t, "missingdep")
		helmErr := action.CheckDependencies(c, c.Metadata.Dependencies)
		_, err := render.Render(c, render.Options{ReleaseName: "rel", Namespace: "conf-missingdep"})
		if helmErr == nil || err == nil || !strings.Contains(err.Error(), helmErr.Error()) {
			t.Fatalf("jetplane %v; helm %v", err, helmErr)
		}
	})
}

// TestHelmKeepsResourcePolicyKeep is helm's side of the keep policy:
// upgrading the keep chart without its extra objects, then uninstalling
// it, leaves the object annotated helm.sh/resource-policy: keep and
// deletes the rest. The HelmRelease e2e test
// (TestHelmResourcePolicyKeep) holds jetplane to the same.
func TestHelmKeepsResourcePolicyKeep(t *testing.T) {
	h := helmEnv{kube: kube.Start(t)}
	ns := "conf-keep"
	cfg := h.config(t, ns)
	if _, err := h.install(t, cfg, loadChart(t, "keep"), "rel", ns, nil); err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	if _, err := up.RunWithContext(context.Background(), "rel", loadChart(t, "keep"), map[string]any{"extra": false}); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		cs, err := kubernetes.NewForConfig(h.kube.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				out = append(out, cm.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := strings.Join(names(), " "); got != "always kept" {
		t.Fatalf("after the upgrade: %s", got)
	}
	if _, err := action.NewUninstall(cfg).Run("rel"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(), " "); got != "kept" {
		t.Fatalf("after uninstall: %s", got)
	}
}

// TestHelmLookupKeepsPassword is helm's side of a generated password: the
// password chart draws it on install and finds it by lookup on upgrade,
// while a value drawn without lookup changes on every upgrade. The
// HelmRelease e2e test TestHelmGeneratedPasswordSurvives holds jetplane
// to the same across upgrades, a rollback and restarts; here jetplane's
// render, given the installed Secret to look up, keeps it too.
func TestHelmLookupKeepsPassword(t *testing.T) {
	h := helmEnv{kube: kube.Start(t)}
	ns := "conf-password"
	cfg := h.config(t, ns)
	live, err := h.install(t, cfg, loadChart(t, "password"), "rel", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(objs map[string]map[string]any) string {
		return fmt.Sprint(objs["Secret/"+ns+"/auth"]["data"].(map[string]any)["password"])
	}
	installed := secret(live)
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	rel, err := up.RunWithContext(context.Background(), "rel", loadChart(t, "password"), map[string]any{"mode": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rel.Manifest, "password: "+installed) {
		t.Fatalf("helm upgrade drew a new password:\n%s", rel.Manifest)
	}
	// jetplane's render with lookup answered by the installed objects.
	res, err := render.Render(loadChart(t, "password"), render.Options{ReleaseName: "rel", Namespace: ns, Revision: 2, IsUpgrade: true,
		Values: map[string]any{"mode": "b"}, Lookup: engineProvider(h.kube.RESTConfig())})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.Key().Kind == "Secret" && o.Manifest["data"].(map[string]any)["password"] != installed {
			t.Fatalf("jetplane's upgrade render drew a new password: %v, installed %s", o.Manifest["data"], installed)
		}
	}
}

// clusterLookup answers lookup from an apiserver, for the core kinds the
// conformance charts look up.
type clusterLookup struct{ client dynamic.Interface }

func engineProvider(cfg *rest.Config) clusterLookup {
	return clusterLookup{client: dynamic.NewForConfigOrDie(cfg)}
}

func (c clusterLookup) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	return c.client.Resource(gv.WithResource(strings.ToLower(kind) + "s")), true, nil
}
