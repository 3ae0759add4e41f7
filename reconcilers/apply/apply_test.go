//go:build unix

package apply

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// TestAgainstAPIServer runs the reconciler against one real kube-apiserver;
// the subtests share it, as starting one costs seconds.
func TestAgainstAPIServer(t *testing.T) {
	env := kubeenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	requests := &requestLog{}
	cfg := env.RESTConfig()
	cfg.WrapTransport = requests.wrap
	state := fakeState{}
	r, err := New(Config{
		Clusters: map[string]*rest.Config{
			"test": cfg,
			"down": {Host: "https://127.0.0.1:1", Timeout: 5 * time.Second},
		},
		State: state,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("reconcile", func(t *testing.T) {
		ctx := t.Context()
		ns := applyObject(t, "team", "shop-ns", map[string]any{"cluster": "test", "manifest": map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}})
		res := mustReconcile(t, r, ns)
		if res.Message != "applied as Namespace/test//shop" {
			t.Errorf("message = %q", res.Message)
		}
		gotNS, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkOwned(t, &gotNS.ObjectMeta, "team", "shop-ns")
		checkApplied(t, res, string(gotNS.UID), gotNS.ResourceVersion)

		web := applyObject(t, "team", "web", map[string]any{"cluster": "test", "manifest": deployment(2)})
		res = mustReconcile(t, r, web)
		dep := getDeployment(t, cs)
		checkOwned(t, &dep.ObjectMeta, "team", "web")
		checkApplied(t, res, string(dep.UID), dep.ResourceVersion)
		if res.Message != "applied as Deployment.apps/test/shop/web" {
			t.Errorf("message = %q", res.Message)
		}
		if *dep.Spec.Replicas != 2 || dep.Labels["app"] != "web" {
			t.Errorf("replicas %d labels %v; want 2 and app=web kept", *dep.Spec.Replicas, dep.Labels)
		}
		var managers []string
		for _, mf := range dep.ManagedFields {
			managers = append(managers, fmt.Sprintf("%s/%s", mf.Manager, mf.Operation))
		}
		if len(managers) != 1 || managers[0] != "jetplane/Apply" {
			t.Errorf("managedFields managers = %v; want [jetplane/Apply]", managers)
		}

		t.Run("in sync costs one GET", func(t *testing.T) {
			requests.reset()
			res := mustReconcile(t, r, web)
			checkApplied(t, res, string(dep.UID), dep.ResourceVersion)
			if got := requests.get(); len(got) != 1 || !strings.HasPrefix(got[0], "GET ") {
				t.Errorf("requests = %v; want one GET", got)
			}
		})

		t.Run("drift is corrected", func(t *testing.T) {
			_, err := cs.AppsV1().Deployments("shop").Patch(ctx, "web", types.MergePatchType,
				[]byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "someone"})
			if err != nil {
				t.Fatal(err)
			}
			res := mustReconcile(t, r, web)
			dep := getDeployment(t, cs)
			if *dep.Spec.Replicas != 2 {
				t.Errorf("replicas = %d after reconcile; want 2", *dep.Spec.Replicas)
			}
			checkApplied(t, res, string(dep.UID), dep.ResourceVersion)
		})

		t.Run("a deleted object is recreated", func(t *testing.T) {
			if err := cs.AppsV1().Deployments("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			res := mustReconcile(t, r, web)
			got := getDeployment(t, cs)
			if got.UID == dep.UID {
				t.Errorf("uid %s unchanged: not recreated", got.UID)
			}
			checkApplied(t, res, string(got.UID), got.ResourceVersion)
		})

		t.Run("a changed manifest is applied", func(t *testing.T) {
			web := applyObject(t, "team", "web", map[string]any{"cluster": "test", "manifest": deployment(3)})
			mustReconcile(t, r, web)
			if got := getDeployment(t, cs); *got.Spec.Replicas != 3 {
				t.Errorf("replicas = %d; want 3", *got.Spec.Replicas)
			}
		})

		t.Run("namespace defaults", func(t *testing.T) {
			cm := applyObject(t, "team", "cm", map[string]any{"cluster": "test", "manifest": configMap("", "loose")})
			res := mustReconcile(t, r, cm)
			if res.Message != "applied as ConfigMap/test/default/loose" {
				t.Errorf("message = %q", res.Message)
			}
			if _, err := cs.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, "loose", metav1.GetOptions{}); err != nil {
				t.Error(err)
			}
		})

		t.Run("an object of another Apply is not taken over", func(t *testing.T) {
			thief := applyObject(t, "team", "thief", map[string]any{"cluster": "test", "manifest": deployment(7)})
			_, err := r.Reconcile(ctx, thief)
			if err == nil || reconcilers.IsTerminal(err) || !strings.Contains(err.Error(), "belongs to Apply team/web") {
				t.Errorf("err = %v; want a retryable error naming team/web", err)
			}
			if got := getDeployment(t, cs); *got.Spec.Replicas != 3 || got.Labels[LabelApplyName] != "web" {
				t.Errorf("replicas %d owner %s; want 3 and web", *got.Spec.Replicas, got.Labels[LabelApplyName])
			}
		})
	})

	t.Run("errors", func(t *testing.T) {
		// Named apart from team/web's Deployment, which would otherwise
		// stop them before the apply, as another Apply's object.
		broken := func(change func(spec map[string]any)) map[string]any {
			d := deployment(1)
			d["metadata"].(map[string]any)["name"] = "broken"
			change(d["spec"].(map[string]any))
			return d
		}
		noSelector := broken(func(s map[string]any) { delete(s, "selector") })
		badReplicas := broken(func(s map[string]any) { s["replicas"] = "x" })
		unknownField := broken(func(s map[string]any) { s["replicaz"] = 1 })
		tests := []struct {
			name         string
			spec         map[string]any
			wantTerminal bool
			wantIn       []string
		}{
			{"invalid: no selector", map[string]any{"cluster": "test", "manifest": noSelector}, true,
				[]string{"apply Deployment.apps/test/shop/broken", "spec.selector: Required value"}},
			{"invalid: replicas not a number", map[string]any{"cluster": "test", "manifest": badReplicas}, true,
				[]string{"apply Deployment.apps/test/shop/broken", ".spec.replicas: expected numeric"}},
			{"unknown field", map[string]any{"cluster": "test", "manifest": unknownField}, true,
				[]string{"spec.replicaz: field not declared in schema"}},
			{"kind not served", map[string]any{"cluster": "test", "manifest": map[string]any{
				"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}, true,
				[]string{"cluster test", "no matches for kind \"Widget\""}},
			{"unknown cluster", map[string]any{"cluster": "nowhere", "manifest": configMap("shop", "x")}, true,
				[]string{`unknown cluster "nowhere"`, "configured: down, test"}},
			{"manifest without a name", map[string]any{"cluster": "test", "manifest": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}}, true,
				[]string{"spec.manifest.metadata.name: required"}},
			{"namespace missing: retried", map[string]any{"cluster": "test", "manifest": configMap("absent", "x")}, false,
				[]string{`namespaces "absent" not found`}},
			{"cluster unreachable: retried", map[string]any{"cluster": "down", "manifest": configMap("shop", "x")}, false,
				[]string{"127.0.0.1:1"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := r.Reconcile(t.Context(), applyObject(t, "team", "bad", tt.spec))
				if err == nil {
					t.Fatalf("Reconcile = %+v, nil; want an error", res)
				}
				if got := reconcilers.IsTerminal(err); got != tt.wantTerminal {
					t.Errorf("IsTerminal = %v; want %v (err %v)", got, tt.wantTerminal, err)
				}
				for _, s := range tt.wantIn {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
			})
		}
		t.Run("unknown cluster is ErrUnknownCluster", func(t *testing.T) {
			_, err := r.Reconcile(t.Context(), applyObject(t, "team", "bad",
				map[string]any{"cluster": "nowhere", "manifest": configMap("shop", "x")}))
			if !errors.Is(err, ErrUnknownCluster) {
				t.Errorf("err = %v; want ErrUnknownCluster", err)
			}
		})
	})

	t.Run("a kind installed later is found", func(t *testing.T) {
		ctx := t.Context()
		widget := applyObject(t, "team", "gadget", map[string]any{"cluster": "test", "manifest": map[string]any{
			"apiVersion": "jetplane.test/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "gadget", "namespace": "shop"}, "spec": map[string]any{"size": 3}}})
		if _, err := r.Reconcile(ctx, widget); !reconcilers.IsTerminal(err) || !strings.Contains(err.Error(), "no matches for kind") {
			t.Fatalf("before the CRD: err = %v; want a terminal no-match", err)
		}
		// The CRD goes in through an Apply too: the discovery cache now
		// holds the cluster's resources without Widget.
		mustReconcile(t, r, applyObject(t, "team", "widgets", map[string]any{"cluster": "test", "manifest": widgetCRD()}))
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := r.Reconcile(ctx, widget)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Widget still not applied 30s after its CRD: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		got, err := cs.RESTClient().Get().AbsPath("/apis/jetplane.test/v1/namespaces/shop/widgets/gadget").DoRaw(ctx)
		if err != nil || !strings.Contains(string(got), `"size":3`) {
			t.Errorf("GET widget = %s, %v; want it with size 3", got, err)
		}
	})

	t.Run("finalize", func(t *testing.T) {
		ctx := t.Context()
		settings := applyObject(t, "team", "settings", map[string]any{"cluster": "test", "manifest": configMap("shop", "settings")})
		mustReconcile(t, r, settings)
		key := projections.Key{Kind: "ConfigMap", Namespace: "test/shop", Name: "settings"}
		state[key] = &schemas.Object{Kind: "ConfigMap", Metadata: &schemas.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{LabelApplyNamespace: "team", LabelApplyName: "settings"}}}

		for i := range 2 {
			res, err := r.Finalize(ctx, settings)
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != 500*time.Millisecond || !strings.Contains(res.Message, "waiting for the bridge to observe ConfigMap/test/shop/settings gone") {
				t.Errorf("run %d: Finalize = %+v; want a requeue after 500ms, waiting for the bridge", i, res)
			}
			if _, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("run %d: get after Finalize: %v; want NotFound", i, err)
			}
		}
		delete(state, key)
		if res, err := r.Finalize(ctx, settings); err != nil || res.RequeueAfter != 0 || res.Message != "" {
			t.Errorf("Finalize = %+v, %v; want done", res, err)
		}

		t.Run("an object another Apply owns is left alone", func(t *testing.T) {
			other := applyObject(t, "team", "other", map[string]any{"cluster": "test", "manifest": deployment(3)})
			if res, err := r.Finalize(ctx, other); err != nil || res.RequeueAfter != 0 {
				t.Errorf("Finalize = %+v, %v; want done", res, err)
			}
			getDeployment(t, cs)
		})
		t.Run("an undecodable manifest had nothing to delete", func(t *testing.T) {
			bad := applyObject(t, "team", "bad", map[string]any{"cluster": "test", "manifest": map[string]any{"kind": "ConfigMap"}})
			if res, err := r.Finalize(ctx, bad); err != nil || res.RequeueAfter != 0 {
				t.Errorf("Finalize = %+v, %v; want done", res, err)
			}
		})
		t.Run("unknown cluster is terminal", func(t *testing.T) {
			gone := applyObject(t, "team", "gone", map[string]any{"cluster": "nowhere", "manifest": configMap("shop", "x")})
			if _, err := r.Finalize(ctx, gone); !reconcilers.IsTerminal(err) || !errors.Is(err, ErrUnknownCluster) {
				t.Errorf("Finalize err = %v; want terminal ErrUnknownCluster", err)
			}
		})
		t.Run("the Deployment is deleted", func(t *testing.T) {
			web := applyObject(t, "team", "web", map[string]any{"cluster": "test", "manifest": deployment(3)})
			if res, err := r.Finalize(ctx, web); err != nil || res.RequeueAfter != 0 {
				t.Errorf("Finalize = %+v, %v; want done (state holds no key)", res, err)
			}
			if _, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after Finalize: %v; want NotFound", err)
			}
		})
	})
}

func deployment(replicas int) map[string]any {
	labels := map[string]any{"app": "web"}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "nginx:1.27",
					"ports":     []any{map[string]any{"containerPort": 80}},
					"resources": map[string]any{"requests": map[string]any{"cpu": "0.5", "memory": "64Mi"}},
				}}},
			},
		},
	}
}

func widgetCRD() map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.jetplane.test"},
		"spec": map[string]any{
			"group": "jetplane.test", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}},
				}},
			}},
		},
	}
}

func mustReconcile(t *testing.T, r *Reconciler, obj *schemas.Object) reconcilers.Result {
	t.Helper()
	res, err := r.Reconcile(t.Context(), obj)
	if err != nil {
		t.Fatalf("Reconcile %s: %v", obj.GetMetadata().GetName(), err)
	}
	return res
}

func getDeployment(t *testing.T, cs kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func checkOwned(t *testing.T, m *metav1.ObjectMeta, ns, name string) {
	t.Helper()
	if m.Labels[LabelApplyNamespace] != ns || m.Labels[LabelApplyName] != name {
		t.Errorf("%s labels = %v; want %s=%s, %s=%s", m.Name, m.Labels, LabelApplyNamespace, ns, LabelApplyName, name)
	}
}

func checkApplied(t *testing.T, res reconcilers.Result, uid, rv string) {
	t.Helper()
	want := fmt.Sprintf("uid=%s resourceVersion=%s", uid, rv)
	if len(res.Conditions) != 1 || res.Conditions[0].GetType() != ConditionApplied ||
		res.Conditions[0].GetStatus() != "True" || res.Conditions[0].GetMessage() != want {
		t.Errorf("conditions = %v; want Applied True %q", res.Conditions, want)
	}
}

// requestLog records the requests of one client as "METHOD path".
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, req.Method+" "+req.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (l *requestLog) reset() { l.mu.Lock(); l.reqs = nil; l.mu.Unlock() }

func (l *requestLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
