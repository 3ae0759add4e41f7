package app_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

// hooksChart is a chart written for the hook tests: one ordinary
// ConfigMap holding a random token, and hooks of every event with
// weights and each delete policy. Pods stand for the hooks helm waits
// for; the test's fake kubelet ends each one as its outcome label says
// (a value makes pre-job fail).
func hooksChart(version string) map[string]string {
	cm := func(name, events, weight, policy string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n    helm.sh/hook: " + events + "\n"
		if weight != "" {
			s += "    helm.sh/hook-weight: \"" + weight + "\"\n"
		}
		if policy != "" {
			s += "    helm.sh/hook-delete-policy: " + policy + "\n"
		}
		return s + "data:\n  chart: " + version + "\n"
	}
	pod := func(name, events, weight, policy, outcome string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels:\n    outcome: " + outcome + "\n  annotations:\n    helm.sh/hook: " + events +
			"\n    helm.sh/hook-weight: \"" + weight + "\"\n    helm.sh/hook-delete-policy: " + policy +
			"\nspec:\n  restartPolicy: Never\n  containers:\n  - {name: main, image: registry.invalid/hook:1}\n"
	}
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: hooked\nversion: " + version + "\n",
		"values.yaml": "preOutcome: ok\n",
		"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  chart: " + version +
			"\n  token: {{ randAlphaNum 16 | quote }}\n",
		"templates/hooks.yaml": strings.Join([]string{
			cm("pre-b", "pre-install,pre-upgrade", "5", ""),
			cm("pre-a", "pre-install,pre-upgrade", "-1", "hook-succeeded"),
			pod("pre-job", "pre-install,pre-upgrade", "0", "before-hook-creation,hook-failed", "{{ .Values.preOutcome }}"),
			cm("post", "post-install,post-upgrade", "", ""),
			cm("rb", "pre-rollback,post-rollback", "", "before-hook-creation,hook-succeeded"),
			cm("bye", "pre-delete", "", ""),
			cm("gone", "post-delete", "", ""),
			pod("test-ok", "test", "1", "before-hook-creation", "ok"),
			"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: post-job\n  annotations:\n    helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-weight: \"-3\"\n" +
				"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: main, image: registry.invalid/hook:1}\n",
		}, "---\n"),
	}
}

// kubelet ends each hook Pod in namespaces as its outcome label says,
// standing in for the node a real cluster would run it on.
func kubelet(t *testing.T, cs kubernetes.Interface, namespaces ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, ns := range namespaces {
		jw, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ev := range jw.ResultChan() {
				j, ok := ev.Object.(*batchv1.Job)
				if !ok || ev.Type != watch.Added {
					continue
				}
				now := metav1.Now()
				j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
				j.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
				}
				if _, err := cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
					t.Logf("job %s: %v", j.Name, err)
				}
			}
		}()
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				p.Status.Phase = corev1.PodSucceeded
				if p.Labels["outcome"] == "fail" {
					p.Status.Phase, p.Status.Message = corev1.PodFailed, "exit code 3"
				}
				_, _ = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}()
	}
}

// recorder records what happens to ConfigMaps and Pods in a namespace,
// in the apiserver's order (the resourceVersion of each event).
type recorder struct {
	mu  sync.Mutex
	evs []recorded
}

type recorded struct {
	rv   int64
	what string
}

func record(t *testing.T, cs kubernetes.Interface, ns string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &recorder{}
	cw, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jw, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{cw, pw, jw} {
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Deleted {
					continue
				}
				m, err := metav1Object(ev.Object)
				if err != nil || m.GetName() == "kube-root-ca.crt" {
					continue
				}
				rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
				kind := "ConfigMap"
				switch ev.Object.(type) {
				case *corev1.Pod:
					kind = "Pod"
				case *batchv1.Job:
					kind = "Job"
				}
				r.mu.Lock()
				r.evs = append(r.evs, recorded{rv: rv, what: fmt.Sprintf("%s %s/%s", ev.Type, kind, m.GetName())})
				r.mu.Unlock()
			}
		}()
	}
	return r
}

func metav1Object(o any) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T", o)
	}
	return m, nil
}

// take returns what happened since the last take, in order, once n
// events arrived.
func (r *recorder) take(t *testing.T, what string, n int) []string {
	t.Helper()
	var out []string
	eventuallyApp(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.evs) < n {
			return false
		}
		slices.SortStableFunc(r.evs, func(a, b recorded) int { return int(a.rv - b.rv) })
		out = nil
		for _, e := range r.evs {
			out = append(out, e.what)
		}
		r.evs = nil
		return true
	})
	return out
}

// settle waits until nothing has been recorded for a while: the end of
// a step whose length is not known in advance.
func (r *recorder) settle() {
	last := -1
	for {
		r.mu.Lock()
		n := len(r.evs)
		r.mu.Unlock()
		if n == last {
			return
		}
		last = n
		time.Sleep(300 * time.Millisecond)
	}
}

func helmConfig(t *testing.T, env *kubeenv.Env, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc := env.Kubeconfig()
	flags.KubeConfig = &kc
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "memory", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loadFiles(t *testing.T, files map[string]string) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(testenv.ChartDir(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHelmHooksMatchHelm runs the hooks chart through install, upgrade,
// rollback, test, a failing upgrade and uninstall twice against the test
// kube-apiserver: once with the helm library, once as a HelmRelease that
// targets the cluster. What each does to the cluster, in the apiserver's
// order (hooks by weight, delete policies, waits for hook Pods), must be
// the same; the rollback brings back revision 1's random token as
// written; a failed hook names itself.
func TestHelmHooksMatchHelm(t *testing.T) {
	env, cs := startKube(t)
	ctx := t.Context()
	const hns, jns = "h-hooks", "j-hooks"
	for _, ns := range []string{hns, jns} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubelet(t, cs, hns, jns)
	hrec, jrec := record(t, cs, hns), record(t, cs, jns)
	token := func(ns string) string {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		return cm.Data["token"]
	}

	// helm.
	cfg := helmConfig(t, env, hns)
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.Timeout = "hk", hns, time.Minute
	if _, err := in.RunWithContext(ctx, loadFiles(t, hooksChart("0.1.0")), nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	hrec.settle()
	var helmSteps [][]string
	helmSteps = append(helmSteps, hrec.take(t, "helm install", 1))
	helmToken1 := token(hns)
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Timeout = hns, time.Minute
	if _, err := up.RunWithContext(ctx, "hk", loadFiles(t, hooksChart("0.2.0")), nil); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	hrec.settle()
	helmSteps = append(helmSteps, hrec.take(t, "helm upgrade", 1))
	rb := action.NewRollback(cfg)
	rb.Version, rb.Timeout = 1, time.Minute
	if err := rb.Run("hk"); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	hrec.settle()
	helmSteps = append(helmSteps, hrec.take(t, "helm rollback", 1))
	if got := token(hns); got != helmToken1 {
		t.Fatalf("helm rollback: token %q, revision 1 had %q", got, helmToken1)
	}
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace, rt.Timeout = hns, time.Minute
	tested, err := rt.Run("hk")
	if err != nil {
		t.Fatalf("helm test: %v", err)
	}
	var helmTests []string
	for _, h := range tested.Hooks {
		for _, e := range h.Events {
			if e == "test" {
				helmTests = append(helmTests, fmt.Sprintf("%s/%s/%s: %s", h.Kind, hns, h.Name, h.LastRun.Phase))
			}
		}
	}
	hrec.settle()
	helmSteps = append(helmSteps, hrec.take(t, "helm test", 1))
	up = action.NewUpgrade(cfg)
	up.Namespace, up.Timeout = hns, time.Minute
	_, helmFail := up.RunWithContext(ctx, "hk", loadFiles(t, hooksChart("0.2.0")), map[string]any{"preOutcome": "fail"})
	if helmFail == nil {
		t.Fatal("helm upgrade with a failing hook succeeded")
	}
	hrec.settle()
	helmSteps = append(helmSteps, hrec.take(t, "helm failed upgrade", 1))
	if _, err := action.NewUninstall(cfg).Run("hk"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	hrec.settle()
	helmSteps = append(helmSteps, hrec.take(t, "helm uninstall", 1))

	// jetplane.
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{
		{Version: "v1", Resource: "configmaps", Namespace: jns}, {Version: "v1", Resource: "pods", Namespace: jns},
		{Group: "batch", Version: "v1", Resource: "jobs", Namespace: jns},
	}}
	a, c := startApp(t, app.Config{Clusters: kube.Clusters{cluster}})
	for _, v := range []string{"0.1.0", "0.2.0"} {
		if _, err := c.PushChart(ctx, "hooked", v, testenv.Chart(t, hooksChart(v))); err != nil {
			t.Fatalf("push chart: %v", err)
		}
	}
	key := projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: "hk"}
	release := func(version, values, annotations string) string {
		return "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: hk, namespace: apps" + annotations + "}\nspec:\n  chart: {name: hooked, version: " + version +
			"}\n  releaseNamespace: " + jns + "\n  cluster: k1\n  values: " + values + "\n"
	}
	wait := func(what string, cond func(*schemas.Object) bool) *schemas.Object {
		t.Helper()
		var o *schemas.Object
		eventuallyApp(t, what, func() bool {
			o = a.Store().Get(key)
			return o != nil && o.GetStatus().GetObservedGeneration() == o.GetMetadata().GetGeneration() && cond(o)
		})
		return o
	}
	deployed := func(o *schemas.Object) bool {
		return reconcilers.IsReady(o) && o.GetStatus().GetDetails().GetFields()["stage"].GetStringValue() == ""
	}
	var jetSteps [][]string
	applyYAML(t, c, release("0.1.0", "{}", ""))
	wait("install", deployed)
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane install", 1))
	jetToken1 := token(jns)
	applyYAML(t, c, release("0.2.0", "{}", ""))
	wait("upgrade", deployed)
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane upgrade", 1))
	rollbackTo(t, c, key, 1)
	wait("rollback", deployed)
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane rollback", 1))
	if got := token(jns); got != jetToken1 {
		t.Fatalf("jetplane rollback: token %q, revision 1 wrote %q", got, jetToken1)
	}
	cur := a.Store().Get(key)
	o := helmreleaseDesired(cur)
	o.Metadata.Annotations[helmrelease.AnnotationTest] = "t1"
	applyObject(t, c, o)
	rel := wait("test", func(o *schemas.Object) bool {
		return o.GetStatus().GetDetails().GetFields()["tested"].GetStringValue() == "t1"
	})
	var jetTests []string
	for _, v := range rel.GetStatus().GetDetails().GetFields()["tests"].GetListValue().GetValues() {
		jetTests = append(jetTests, strings.Replace(v.GetStringValue(), jns, hns, 1))
	}
	if f := rel.GetStatus().GetDetails().GetFields(); f["testPhase"].GetStringValue() != "Succeeded" || !slices.Equal(jetTests, helmTests) {
		t.Fatalf("test: jetplane %v (%v), helm %v", jetTests, f["testPhase"], helmTests)
	}
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane test", 1))
	applyYAML(t, c, release("0.2.0", "{preOutcome: fail}", ""))
	rel = wait("failed upgrade", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == reconcilers.PhaseFailed })
	want := "pre-upgrade hook hooked/templates/hooks.yaml:"
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, want) || !strings.Contains(msg, "Pod/"+jns+"/pre-job failed: exit code 3") {
		t.Fatalf("failed hook: %q; want it named (helm: %v)", msg, helmFail)
	}
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane failed upgrade", 1))
	if _, err := c.Delete(ctx, apiKey(key)); err != nil {
		t.Fatal(err)
	}
	eventuallyApp(t, "release deleted", func() bool { return a.Store().Get(key) == nil })
	jrec.settle()
	jetSteps = append(jetSteps, jrec.take(t, "jetplane delete", 1))

	for i, step := range []string{"install", "upgrade", "rollback", "test", "failed upgrade", "delete"} {
		t.Logf("%s: %v", step, jetSteps[i])
		if !slices.Equal(helmSteps[i], jetSteps[i]) {
			t.Errorf("%s:\n    helm %v\njetplane %v", step, helmSteps[i], jetSteps[i])
		}
	}
	// What stays: hooks helm leaves, the same in both.
	for _, ns := range []string{hns, jns} {
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range cms.Items {
			names = append(names, cm.Name)
		}
		t.Logf("%s keeps %v", ns, names)
	}
	if _, err := cs.CoreV1().ConfigMaps(jns).Get(ctx, "app", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("app after delete: %v", err)
	}
}

func apiKey(k projections.Key) api.Key {
	return api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// helmreleaseDesired is cur as its writer gives it.
func helmreleaseDesired(cur *schemas.Object) *schemas.Object {
	md := cur.GetMetadata()
	ann := map[string]string{}
	for k, v := range md.GetAnnotations() {
		if !strings.HasPrefix(k, "gate.jetplane.dev/") {
			ann[k] = v
		}
	}
	return &schemas.Object{ApiVersion: cur.GetApiVersion(), Kind: cur.GetKind(), Spec: cur.GetSpec(),
		Metadata: &schemas.ObjectMeta{Name: md.GetName(), Namespace: md.GetNamespace(), Labels: md.GetLabels(), Annotations: ann}}
}

func applyObject(t *testing.T, c *api.Client, o *schemas.Object) {
	t.Helper()
	body, err := protojson.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, string(body))
}

// TestHelmDryRunNamesField: a release bound for a cluster whose chart
// renders an object that cluster refuses fails before anything is
// written, naming the template, the object and the field as the
// apiserver's server-side dry run names it.
func TestHelmDryRunNamesField(t *testing.T) {
	env, cs := startKube(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, c := startApp(t, app.Config{Clusters: kube.Clusters{{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{{Version: "v1", Resource: "configmaps", Namespace: "dry"}}}}})
	files := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: dry\nversion: 0.1.0\n",
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n",
		"templates/svc.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: {{ .Values.port }}\n",
		"values.yaml":        "port: 70000\n",
	}
	if _, err := c.PushChart(ctx, "dry", "0.1.0", testenv.Chart(t, files)); err != nil {
		t.Fatal(err)
	}
	key := projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: "dry"}
	applyYAML(t, c, "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: dry, namespace: apps}\nspec:\n  chart: {name: dry, version: 0.1.0}\n  releaseNamespace: dry\n  cluster: k1\n")
	var rel *schemas.Object
	eventuallyApp(t, "the release failed", func() bool {
		rel = a.Store().Get(key)
		return rel != nil && rel.GetStatus().GetPhase() == reconcilers.PhaseFailed
	})
	msg := rel.GetStatus().GetMessage()
	for _, want := range []string{"cluster k1 refuses the revision (server-side dry run)", "dry/templates/svc.yaml:1: Service/dry/web: spec.ports[0].port: Invalid value: 70000"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("status %q lacks %q", msg, want)
		}
	}
	if list, _ := a.Store().List(projections.Query{Group: helmrelease.Group(key)}); len(list) != 0 {
		t.Fatalf("%d children written", len(list))
	}
	if _, err := cs.CoreV1().ConfigMaps("dry").Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("settings in the cluster: %v", err)
	}
}
