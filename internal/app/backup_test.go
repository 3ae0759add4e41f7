package app_test

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
)

// TestBackupRestore takes an online backup of a running jetplane, restores
// it into a fresh data directory, and starts jetplane there: the same
// state (objects, versions, statuses), the same history of every key
// (deleted ones included), and the same pushed charts.
func TestBackupRestore(t *testing.T) {
	a, c := startApp(t, app.Config{})
	ctx := t.Context()
	for i := range 3 {
		applyYAML(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {level: \""+string(rune('a'+i))+"\"}\n---\n"+
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other"+string(rune('0'+i))+", namespace: shop}\n")
	}
	if _, err := c.Delete(ctx, api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "other1"}); err != nil {
		t.Fatal(err)
	}
	chart := testenv.Chart(t, chartFiles("web", nil))
	if _, err := c.PushChart(ctx, "web", "0.1.0", chart); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := c.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	head, err := a.Log().LastSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if err := app.Restore(ctx, dir, events.ConnectOptions{}, bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := app.Restore(ctx, dir, events.ConnectOptions{}, bytes.NewReader(backup.Bytes())); !errors.Is(err, events.ErrStreamExists) {
		t.Fatalf("a second restore over the first: %v, want ErrStreamExists", err)
	}
	b, _ := startApp(t, app.Config{DataDir: dir})
	if got, _ := b.Log().LastSequence(ctx); got != head {
		t.Fatalf("restored log ends at %d, the original at %d", got, head)
	}
	dump := func(x *app.App) map[projections.Key]string {
		objs, _ := x.Store().List(projections.Query{})
		out := map[projections.Key]string{}
		for _, o := range objs {
			j, _ := protojson.Marshal(o)
			out[projections.ObjectKey(o)] = string(j)
		}
		return out
	}
	want, got := dump(a), dump(b)
	if len(want) != 3 || len(got) != len(want) {
		t.Fatalf("objects: original %d, restored %d", len(want), len(got))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n original %s\n restored %s", k, w, got[k])
		}
	}
	for _, name := range []string{"settings", "other0", "other1", "other2"} {
		k := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: name}
		ha, hb := keyEvents(t, a, k), keyEvents(t, b, k)
		if len(ha) == 0 || len(ha) != len(hb) {
			t.Fatalf("%s history: %d events, restored %d", k, len(ha), len(hb))
		}
		for i := range ha {
			ja, _ := protojson.Marshal(ha[i])
			jb, _ := protojson.Marshal(hb[i])
			if string(ja) != string(jb) {
				t.Errorf("%s event %d:\n original %s\n restored %s", k, i, ja, jb)
			}
		}
	}
	charts, err := b.Log().Charts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := charts.Get(ctx, "web", "0.1.0"); err != nil || !bytes.Equal(got, chart) {
		t.Fatalf("restored chart: %d bytes, %v", len(got), err)
	}
	if err := app.Restore(ctx, t.TempDir(), events.ConnectOptions{}, bytes.NewReader([]byte("garbage"))); err == nil {
		t.Fatal("restored garbage")
	}
}
