//go:build unix

package app_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

// TestHelmReleaseClusterLookup: a release that names a cluster looks up
// that cluster's live objects, as helm's lookup does: a Secret made in
// the cluster, not by jetplane, reaches the rendered ConfigMap.
func TestHelmReleaseClusterLookup(t *testing.T) {
	env, cs := startKube(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("shop").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "made-by-hand"},
		Data: map[string][]byte{"token": []byte("from-the-cluster")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{{Version: "v1", Resource: "configmaps", Namespace: "shop"}}}
	a, c := startApp(t, app.Config{Clusters: kube.Clusters{cluster}})
	if _, err := c.PushChart(ctx, "web", "0.1.0", testenv.Chart(t, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  token: {{ (lookup "v1" "Secret" .Release.Namespace "made-by-hand").data.token | b64dec | quote }}
`,
	})); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, releaseYAML("k1", "0.1.0", "{}"))
	waitRelease(t, a, "revision 1 Ready", func(o *schemas.Object) bool {
		return strings.Contains(o.GetStatus().GetMessage(), "1/1 children Ready")
	})
	cm, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "web-settings", metav1.GetOptions{})
	if err != nil || cm.Data["token"] != "from-the-cluster" {
		t.Fatalf("configmap: %v, %v", cm.Data, err)
	}
}
