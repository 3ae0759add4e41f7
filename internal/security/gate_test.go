package security

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Hostile cases against the gate: a writer confined to namespace shop
// tries to reach what is not its own, through every writer jetplane has.
// Each checks the log and state did not move where nothing may be written,
// and that the server still serves.

// send makes one API request and returns its status and body.
func send(t *testing.T, a *app.App, token, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// serving fails the test unless the API still answers reads and writes.

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// emptyModule is the smallest valid WebAssembly module.
var emptyModule = []byte("\x00asm\x01\x00\x00\x00")

// Images and charts are shared: a confined writer neither replaces nor
// deletes the admin's image, nor pushes a chart; it pushes images under
// its own namespace's name.
func TestGateImagesAndChartsScoped(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	ctx := context.Background()
	orig, err := admin.PushImage(ctx, "app:v1", bytes.NewReader(emptyModule), int64(len(emptyModule)))
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprintOf(t, a)
	other := append(append([]byte{}, emptyModule...), 0x01, 0x01, 0x00) // an empty type section: another digest, still a valid module
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/images?ref=app:v1&namespace=shop"},
		{"POST", "/v1/images?ref=app:v1"},
		{"DELETE", "/v1/images?ref=app:v1&namespace=shop"},
	} {
		if code, body := send(t, a, "shop-writer-token", tc.method, tc.path, bytes.NewReader(other)); code != http.StatusForbidden {
			t.Errorf("%s %s by a writer confined to shop: %d %s, want 403", tc.method, tc.path, code, body)
		}
	}
	shop := &api.Client{BaseURL: a.URL(), Token: "shop-writer-token"}
	chart := map[string]string{"Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n"}
	if _, err := shop.PushChart(ctx, "web", "1.0.0", testenv.Chart(t, chart)); err == nil || !strings.Contains(err.Error(), "charts are shared") {
		t.Errorf("a chart pushed by a writer confined to shop: %v, want a refusal", err)
	}
	list, err := admin.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, im := range list {
		if im.Ref == "app:v1" {
			found = true
			if im.Digest != orig.Digest {
				t.Fatalf("app:v1 is %s, was the admin's %s", im.Digest, orig.Digest)
			}
		}
	}
	if !found {
		t.Fatal("the admin's app:v1 is gone")
	}
	if code, body := send(t, a, "shop-writer-token", "POST", "/v1/images?ref=shop/app:v1", bytes.NewReader(other)); code != http.StatusOK {
		t.Fatalf("push shop/app:v1 by shop's writer: %d %s", code, body)
	}
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// evilChart renders objects in another namespace and a Namespace.
func evilChart() map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: evil\nversion: 0.1.0\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: other}
data: {owned: "by-shop"}
`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: other}
stringData: {password: "by-shop"}
`,
		"templates/ns.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: evil}
`,
	}
}

func objectOf(t *testing.T, a *app.App, k projections.Key) *schemas.Object {
	t.Helper()
	return a.Store().Get(k)
}

// A HelmRelease acts with the scope of whoever applied it: a release of
// shop's writer writes nothing outside shop, and deleting it deletes
// nothing outside shop.
func TestGateHelmReleaseChildrenStayInScope(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	shop := &api.Client{BaseURL: a.URL(), Token: "shop-writer-token"}
	ctx := context.Background()
	victims := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: other}\ndata: {owned: by-admin}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: sec, namespace: other}\nstringData: {password: by-admin}\n"
	if _, err := admin.Apply(ctx, "victims.yaml", []byte(victims), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PushChart(ctx, "evil", "0.1.0", testenv.Chart(t, evilChart())); err != nil {
		t.Fatal(err)
	}
	cmKey := projections.Key{Kind: "ConfigMap", Namespace: "other", Name: "cfg"}
	secKey := projections.Key{Kind: "Secret", Namespace: "other", Name: "sec"}
	nsKey := projections.Key{Kind: "Namespace", Name: "evil"}
	cmRV := objectOf(t, a, cmKey).GetMetadata().GetResourceVersion()
	secRV := objectOf(t, a, secKey).GetMetadata().GetResourceVersion()

	rel := "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: evil, namespace: shop}\nspec:\n  chart: {name: evil, version: 0.1.0}\n"
	if _, err := shop.Apply(ctx, "rel.yaml", []byte(rel), ""); err != nil {
		t.Fatal(err)
	}
	relKey := projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "evil"}
	eventually(t, "the release to fail", func() bool {
		return strings.Contains(objectOf(t, a, relKey).GetStatus().GetMessage(), "confined to namespaces shop")
	})
	if rv := objectOf(t, a, cmKey).GetMetadata().GetResourceVersion(); rv != cmRV {
		t.Fatalf("other/cfg was written by shop's release (resourceVersion %d → %d)", cmRV, rv)
	}
	if rv := objectOf(t, a, secKey).GetMetadata().GetResourceVersion(); rv != secRV {
		t.Fatalf("other/sec was written by shop's release (resourceVersion %d → %d)", secRV, rv)
	}
	if objectOf(t, a, nsKey) != nil {
		t.Fatal("shop's release created Namespace evil")
	}
	if _, err := shop.Delete(ctx, api.Key{Kind: "HelmRelease", Namespace: "shop", Name: "evil"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the release to be gone", func() bool { return objectOf(t, a, relKey) == nil })
	before := fingerprintOf(t, a)
	for _, k := range []projections.Key{cmKey, secKey} {
		o := objectOf(t, a, k)
		if o == nil || o.GetStatus().GetGoal() == projections.GoalDeleted {
			t.Fatalf("deleting shop's release deleted %s", k)
		}
	}
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// A release never silently takes over an object someone else wrote: it
// reports a Conflict naming it, and leaves it as its writer left it,
// until the writer allows the adoption.
func TestGateNoSilentAdoption(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	shop := &api.Client{BaseURL: a.URL(), Token: "shop-writer-token"}
	ctx := context.Background()
	chart := map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: chart}\n",
	}
	if _, err := admin.PushChart(ctx, "web", "0.1.0", testenv.Chart(t, chart)); err != nil {
		t.Fatal(err)
	}
	mine := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {mode: mine}\n"
	if _, err := shop.Apply(ctx, "mine.yaml", []byte(mine), ""); err != nil {
		t.Fatal(err)
	}
	cmKey := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "settings"}
	rv := objectOf(t, a, cmKey).GetMetadata().GetResourceVersion()
	rel := "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec:\n  chart: {name: web, version: 0.1.0}\n  releaseNamespace: shop\n"
	if _, err := shop.Apply(ctx, "rel.yaml", []byte(rel), ""); err != nil {
		t.Fatal(err)
	}
	relKey := projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "web"}
	eventually(t, "a Conflict condition naming shop/settings", func() bool {
		for _, c := range objectOf(t, a, relKey).GetStatus().GetConditions() {
			if c.GetType() == "Conflict" && c.GetStatus() == "True" && strings.Contains(c.GetMessage(), "ConfigMap/shop/settings") {
				return true
			}
		}
		return false
	})
	if got := objectOf(t, a, cmKey).GetMetadata().GetResourceVersion(); got != rv {
		t.Fatalf("the release adopted shop/settings (resourceVersion %d → %d)", rv, got)
	}
	// Allowed, the release adopts it.
	allowed := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop, annotations: {jetplane.dev/allow-adoption-by: HelmRelease/shop/web}}\ndata: {mode: mine}\n"
	if _, err := shop.Apply(ctx, "mine.yaml", []byte(allowed), ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the release to adopt shop/settings", func() bool {
		d := objectOf(t, a, cmKey).GetSpec().GetFields()["data"].GetStructValue().GetFields()["mode"].GetStringValue()
		return d == "chart"
	})
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// Cluster-scoped kinds refuse metadata.namespace: a Node "in" shop would
// otherwise be a second node that breaks scheduling.
func TestGateClusterScopedKindRefusesNamespace(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	before := fingerprintOf(t, a)
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: local, namespace: shop}\nspec: {unschedulable: true}\n"
	for _, tok := range []string{"shop-writer-token", "admin-token"} {
		code, body := send(t, a, tok, "POST", "/v1/apply", strings.NewReader(node))
		if code != http.StatusBadRequest && code != http.StatusForbidden {
			t.Fatalf("%s: a namespaced Node: %d %s, want 400 or 403", tok, code, body)
		}
		if tok == "admin-token" && !strings.Contains(string(body), "cluster-scoped") {
			t.Fatalf("the refusal does not say why: %s", body)
		}
	}
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// A confined token counts objects only in its namespaces, and describe
// tells it nothing of a dependency in another one.
func TestGateKindsAndDescribeConfined(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	ctx := context.Background()
	doc := ""
	for _, n := range []string{"a", "b", "c"} {
		doc += "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + n + ", namespace: other}\ndata: {x: y}\n---\n"
	}
	doc += "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, namespace: shop, dependsOn: [{kind: ConfigMap, namespace: other, name: a}]}\ndata: {x: y}\n"
	if _, err := admin.Apply(ctx, "cms.yaml", []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	before := fingerprintOf(t, a)
	code, body := send(t, a, "shop-reader-token", "GET", "/v1/kinds?namespace=shop", nil)
	if code != http.StatusOK {
		t.Fatalf("kinds: %d %s", code, body)
	}
	var kinds api.KindsResponse
	if err := json.Unmarshal(body, &kinds); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds.Kinds {
		if k.Name == "ConfigMap" && k.Objects != 1 {
			t.Fatalf("shop's reader counts %d ConfigMaps, want its 1", k.Objects)
		}
	}
	code, body = send(t, a, "shop-reader-token", "GET", "/v1/describe?kind=ConfigMap&namespace=shop&name=mine", nil)
	if code != http.StatusOK {
		t.Fatalf("describe: %d %s", code, body)
	}
	var d api.DescribeResponse
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Dependencies) != 1 || d.Dependencies[0].Ready != "Unknown" || d.Dependencies[0].Phase != "" {
		t.Fatalf("describe tells shop's reader of other/a: %+v", d.Dependencies)
	}
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// Secrets a chart renders, Secrets inside an Apply's manifest, and Secret
// values a chart's fail quotes are nowhere in clear: not in the log's
// bytes, the snapshot, any file under the data directory, nor a status.
func TestGateSecretsSealedForEveryWriter(t *testing.T) {
	dir := t.TempDir()
	a, stop := run(t, app.Config{DataDir: dir, Principals: principals()})
	defer stop()
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	ctx := context.Background()
	chartPW, applyPW, valuesPW := "chartpw-"+nuid.Next(), "applypw-"+nuid.Next(), "valuespw-"+nuid.Next()
	chart := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: db\nversion: 0.1.0\n",
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: {{ .Values.password | quote }}}
`,
	}
	failing := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"templates/cm.yaml":  "{{ fail (printf \"cannot use %s\" .Values.db.password) }}\n",
		"templates/cm2.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n",
	}
	if _, err := admin.PushChart(ctx, "db", "0.1.0", testenv.Chart(t, chart)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PushChart(ctx, "leak", "0.1.0", testenv.Chart(t, failing)); err != nil {
		t.Fatal(err)
	}
	docs := "apiVersion: v1\nkind: Secret\nmetadata: {name: dbvals, namespace: shop}\nstringData:\n  values.yaml: \"password: " + chartPW + "\"\n---\n" +
		"apiVersion: v1\nkind: HelmRelease\nmetadata: {name: db, namespace: shop}\nspec:\n  chart: {name: db, version: 0.1.0}\n  releaseNamespace: shop\n  valuesFrom: [{kind: Secret, name: dbvals, key: values.yaml}]\n---\n" +
		"apiVersion: v1\nkind: Apply\nmetadata: {name: creds, namespace: shop}\nspec:\n  cluster: east\n  manifest:\n    apiVersion: v1\n    kind: Secret\n    metadata: {name: creds, namespace: shop}\n    stringData: {token: " + applyPW + "}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: leakvals, namespace: shop}\nstringData:\n  values.yaml: \"db: {password: " + valuesPW + "}\"\n---\n" +
		"apiVersion: v1\nkind: HelmRelease\nmetadata: {name: leak, namespace: shop}\nspec:\n  chart: {name: leak, version: 0.1.0}\n  releaseNamespace: shop\n  valuesFrom: [{kind: Secret, name: leakvals, key: values.yaml}]\n"
	if _, err := admin.Apply(ctx, "docs.yaml", []byte(docs), ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chart's Secret", func() bool {
		return a.Store().Get(projections.Key{Kind: "Secret", Namespace: "shop", Name: "db"}) != nil
	})
	leakKey := projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "leak"}
	eventually(t, "the failing release's status", func() bool {
		return strings.Contains(a.Store().Get(leakKey).GetStatus().GetMessage(), "cannot use")
	})
	secrets := []string{chartPW, applyPW, valuesPW}
	for i, ev := range rawLog(t, a) {
		for _, s := range secrets {
			if bytes.Contains(ev, []byte(s)) {
				t.Errorf("event %d holds %s in clear: %.300s", i+1, s[:strings.IndexByte(s, '-')], ev)
			}
		}
	}
	for _, o := range []*schemas.Object{a.Store().Get(leakKey), a.Store().Get(projections.Key{Kind: "HelmRelease", Namespace: "shop", Name: "db"})} {
		st, _ := json.Marshal(o.GetStatus())
		for _, s := range secrets {
			if bytes.Contains(st, []byte(s)) {
				t.Errorf("the status of %s holds a Secret value: %s", o.GetMetadata().GetName(), st)
			}
		}
	}
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	// Stopping saves a snapshot: it and every other file are checked.
	stop()
	for _, s := range secrets {
		if hits := filesContaining(t, dir, s); len(hits) > 0 {
			t.Errorf("the data directory holds %s in clear in %q", s[:strings.IndexByte(s, '-')], hits)
		}
	}
}

// Destroying a Secret's data keys on one instance reaches every instance:
// one that had the keys cached shows the values destroyed too.
func TestGateShredReachesEveryInstance(t *testing.T) {
	a := start(t, app.Config{Principals: principals(), Instance: "a"})
	b := start(t, app.Config{
		NATS:              events.ConnectOptions{URLs: a.NATSURL(), CredsFile: a.Creds().InstanceCreds()},
		EncryptionKeyFile: filepath.Join(a.Creds().Dir(), "encryption.keys"),
		Principals:        principals(), Instance: "b",
	})
	ctx := context.Background()
	pw := "shredpw-" + nuid.Next()
	onA := &api.Client{BaseURL: a.URL(), Token: "admin-token", ShowSecrets: true}
	onB := &api.Client{BaseURL: b.URL(), Token: "admin-token", ShowSecrets: true}
	if _, err := onA.Apply(ctx, "s.yaml", []byte(secretYAML("db", pw)), ""); err != nil {
		t.Fatal(err)
	}
	k := api.Key{Kind: "Secret", Namespace: "shop", Name: "db"}
	eventually(t, "instance b to read the value (and cache its key)", func() bool {
		raw, err := onB.Get(ctx, k)
		return err == nil && field(t, raw, "stringData", "password") == pw
	})
	purger := &api.Client{BaseURL: a.URL(), Token: "admin-token", PurgeSecretData: true}
	if _, err := purger.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	eventually(t, "instance b to show the value destroyed", func() bool {
		h, err := onB.History(ctx, k)
		return err == nil && len(h.Events) > 0 && !bytes.Contains(h.Events[0], []byte(pw)) && bytes.Contains(h.Events[0], []byte(seal.Destroyed))
	})
	serving(t, &api.Client{BaseURL: b.URL(), Token: "admin-token"})
}

// The bridge may watch Secrets: what it observes is sealed by the gate
// before the log sees it, and a Secret an Apply carries reaches the
// cluster in clear while the log holds it sealed.
func TestGateBridgeSealsObservedSecrets(t *testing.T) {
	env := kubeenv.Start(t)
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{{Version: "v1", Resource: "secrets", Namespace: "default"}}}
	a := start(t, app.Config{Principals: principals(), Clusters: kube.Clusters{cluster}})
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	observedPW, appliedPW := "observedpw-"+nuid.Next(), "appliedpw-"+nuid.Next()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte(observedPW)}}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	apply := "apiVersion: v1\nkind: Apply\nmetadata: {name: creds, namespace: default}\nspec:\n  cluster: k1\n  manifest:\n    apiVersion: v1\n    kind: Secret\n    metadata: {name: creds, namespace: default}\n    stringData: {token: " + appliedPW + "}\n"
	if _, err := admin.Apply(ctx, "apply.yaml", []byte(apply), ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the observed Secret in current state", func() bool {
		return a.Store().Get(projections.Key{Kind: "Secret", Namespace: "k1/default", Name: "db"}) != nil
	})
	eventually(t, "the Apply's Secret in the cluster, in clear", func() bool {
		s, err := cs.CoreV1().Secrets("default").Get(ctx, "creds", metav1.GetOptions{})
		return err == nil && string(s.Data["token"]) == appliedPW
	})
	eventually(t, "the Apply's Secret observed back", func() bool {
		return a.Store().Get(projections.Key{Kind: "Secret", Namespace: "k1/default", Name: "creds"}) != nil
	})
	for _, s := range []string{observedPW, appliedPW} {
		b64 := base64.StdEncoding.EncodeToString([]byte(s))
		for i, ev := range rawLog(t, a) {
			if bytes.Contains(ev, []byte(s)) || bytes.Contains(ev, []byte(b64)) {
				t.Fatalf("event %d holds %s in clear", i+1, s[:strings.IndexByte(s, '-')])
			}
		}
	}
	// Those who may see it still do.
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token", ShowSecrets: true}
	raw, err := c.Get(ctx, api.Key{Kind: "Secret", Namespace: "k1/default", Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if got := field(t, raw, "data", "password"); got != base64.StdEncoding.EncodeToString([]byte(observedPW)) {
		t.Fatalf("the observed Secret reads %q with showSecrets", got)
	}
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}

// A confined writer cannot make the server fetch from an address of its
// choosing through a release's chart repository.
func TestGateConfinedReleaseFetchesNoRepository(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	before := fingerprintOf(t, a)
	rel := "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec:\n  chart: {name: web, version: 0.1.0, repository: 'http://127.0.0.1:1/internal'}\n"
	if code, body := send(t, a, "shop-writer-token", "POST", "/v1/apply", strings.NewReader(rel)); code != http.StatusForbidden {
		t.Fatalf("a confined writer's release from a repository: %d %s, want 403", code, body)
	}
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}
