package app_test

import (
	"testing"

	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// TestHelmRollbackRestoresWrittenObjects: a chart that draws a random
// value without lookup gets a new one on every revision; rolling back to
// revision 1 writes revision 1's value again, as helm re-applies the
// manifest it stored, instead of drawing a third.
func TestHelmRollbackRestoresWrittenObjects(t *testing.T) {
	a, c := startApp(t, app.Config{})
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"values.yaml": "mode: a\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-token\ndata:\n  mode: {{ .Values.mode | quote }}\n" +
			"  token: {{ randAlphaNum 16 | quote }}\n",
	}
	if _, err := c.PushChart(t.Context(), "web", "0.1.0", testenv.Chart(t, files)); err != nil {
		t.Fatal(err)
	}
	cm := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web-token"}
	data := func() map[string]any {
		o := a.Store().Get(cm)
		if o == nil {
			return nil
		}
		d, _ := o.GetSpec().AsMap()["data"].(map[string]any)
		return d
	}
	release := func(rev int64, mode string) *schemas.Object {
		t.Helper()
		return waitRelease(t, a, "revision "+mode, func(o *schemas.Object) bool {
			return o.GetMetadata().GetGeneration() == rev && reconcilers.IsReady(o) && data()["mode"] == mode
		})
	}
	applyYAML(t, c, releaseYAML("", "0.1.0", "{mode: a}"))
	release(1, "a")
	first := data()["token"]
	applyYAML(t, c, releaseYAML("", "0.1.0", "{mode: b}"))
	release(2, "b")
	if data()["token"] == first {
		t.Fatal("the upgrade kept the random token; the chart draws a new one")
	}
	rollback(t, c, 1)
	release(3, "a")
	if got := data()["token"]; got != first {
		t.Fatalf("after rollback to revision 1 the token is %v, revision 1 wrote %v", got, first)
	}
}
