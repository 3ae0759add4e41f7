package kubeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/managedfields"
)

// TestTrackedMemo: field management through the memo gives what the field
// manager gives for the same write, for writes of one shape (a hit) and of
// shapes that differ where field sets do (a list's items, a value changed
// or kept, a field added or removed, another manager, the status
// subresource); the times managedFields record are left out of the
// comparison (they are the clock's).
func TestTrackedMemo(t *testing.T) {
	s := &Server{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	deploy := resource{group: "apps", version: "v1", kind: "Deployment", plural: "deployments", namespaced: true}
	probe := resource{group: "bench.example.dev", version: "v1", kind: "Probe", plural: "probes", namespaced: true}
	const dep = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"NAME","namespace":"shop","labels":{"app":"web"}},
"spec":{"replicas":REPLICAS,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
"spec":{"containers":[{"name":"web","image":"IMAGE"}CONTAINERS]}}}}`
	const prb = `{"apiVersion":"bench.example.dev/v1","kind":"Probe","metadata":{"name":"NAME","namespace":"shop"},"spec":{"size":REPLICAS}STATUS}`
	obj := func(tmpl, name, replicas, image, containers, status string) map[string]any {
		r := strings.NewReplacer("NAME", name, "REPLICAS", replicas, "IMAGE", image, "CONTAINERS", containers, "STATUS", status)
		var m map[string]any
		if err := json.Unmarshal([]byte(r.Replace(tmpl)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	type write struct {
		res        resource
		sub, agent string
		live, next map[string]any
	}
	// The memo's clock stands still: every write of a shape after the
	// first is a hit.
	now := time.Now()
	trackedNow = func() time.Time { return now }
	memo := newTrackedMemo(1024)
	t.Cleanup(func() { trackedNow, trackedResults = time.Now, newTrackedMemo(1024) })
	// track through the memo (on) or the field manager alone (an empty
	// memo, dropped after).
	track := func(w write, on bool) any {
		trackedResults = memo
		if !on {
			trackedResults = newTrackedMemo(1024)
		}
		r := httptest.NewRequest("PUT", "/", nil)
		r.Header.Set("User-Agent", w.agent)
		q := &request{r: r, res: w.res, namespace: "shop", name: "x", sub: w.sub}
		var live map[string]any
		if w.live != nil {
			live = jsonCopy(t, w.live)
			// As stored: managedFields recorded by the field manager.
			s.track(&request{r: r, res: w.res, namespace: "shop", name: "x"}, nil, live)
		}
		m := jsonCopy(t, w.next)
		s.track(q, live, m)
		return withoutTimes(t, metaOf(m)["managedFields"])
	}
	st := `,"status":{"phase":"PHASE","observedGeneration":1}`
	writes := []write{
		{deploy, "", "a", nil, obj(dep, "one", "3", "web:1", "", "")},
		{deploy, "", "a", nil, obj(dep, "two", "4", "web:2", "", "")},
		{deploy, "", "a", nil, obj(dep, "three", "4", "web:2", `,{"name":"side","image":"s"}`, "")},
		{deploy, "", "b", nil, obj(dep, "four", "4", "web:2", "", "")},
		{deploy, "", "a", obj(dep, "x", "3", "web:1", "", ""), obj(dep, "x", "3", "web:1", "", "")},
		{deploy, "", "b", obj(dep, "x", "3", "web:1", "", ""), obj(dep, "x", "3", "web:2", "", "")},
		{deploy, "", "b", obj(dep, "x", "3", "web:1", "", ""), obj(dep, "x", "5", "web:1", "", "")},
		{deploy, "", "b", obj(dep, "x", "3", "web:1", "", ""), obj(dep, "x", "3", "web:1", `,{"name":"side","image":"s"}`, "")},
		{deploy, "", "b", obj(dep, "y", "3", "web:1", `,{"name":"side","image":"s"}`, ""), obj(dep, "y", "3", "web:1", "", "")},
		{probe, "", "c", nil, obj(prb, "p1", "1", "", "", "")},
		{probe, "", "c", nil, obj(prb, "p2", "2.5", "", "", "")},
		{probe, "status", "d", obj(prb, "p1", "1", "", "", ""), obj(prb, "p1", "1", "", "", strings.Replace(st, "PHASE", "Ready", 1))},
		{probe, "status", "d", obj(prb, "p2", "1", "", "", ""), obj(prb, "p2", "1", "", "", strings.Replace(st, "PHASE", "Done", 1))},
		{probe, "status", "d", obj(prb, "p3", "1", "", "", strings.Replace(st, "PHASE", "Ready", 1)), obj(prb, "p3", "1", "", "", strings.Replace(st, "PHASE", "Ready", 1))},
		{probe, "status", "d", obj(prb, "p3", "1", "", "", strings.Replace(st, "PHASE", "Ready", 1)), obj(prb, "p3", "1", "", "", strings.Replace(st, "PHASE", "Failed", 1))},
	}
	// Every write after every other through one memo: each meets the
	// entries the others left, of its shape or not.
	for round := range 2 {
		for i, w := range writes {
			want := track(w, false)
			if got := track(w, true); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, write %d: through the memo\n%v\nthe field manager alone\n%v", round, i, got, want)
			}
		}
		if round == 0 && memo.hits == 0 {
			t.Fatal("no write of the first round found its shape in the memo")
		}
	}
	// The second round found every write's result (and its live object's).
	calls := 0
	for _, w := range writes {
		calls++
		if w.live != nil {
			calls++
		}
	}
	if memo.hits <= calls {
		t.Fatalf("%d hits in the memo, want more than %d", memo.hits, calls)
	}
}

func jsonCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// withoutTimes is managedFields without the time of each entry, as JSON.
func withoutTimes(t *testing.T, mf any) any {
	t.Helper()
	b, err := json.Marshal(mf)
	if err != nil {
		t.Fatal(err)
	}
	var l []map[string]any
	_ = json.Unmarshal(b, &l)
	for _, e := range l {
		delete(e, "time")
	}
	return l
}

// liveView, which field management reads for the memo's key, is the
// object liveObject hands the field manager, without copying it.
func TestLiveViewIsLiveObject(t *testing.T) {
	s := &Server{}
	probe := resource{group: "bench.example.dev", version: "v1", kind: "Probe", plural: "probes", namespaced: true}
	const stored = `{"apiVersion":"bench.example.dev/v1","kind":"Probe","metadata":{"name":"a","namespace":"shop","group":"g",
"dependsOn":[{"kind":"ConfigMap","name":"c"}],"managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
"spec":{"size":1},"status":{"phase":"Ready"}}`
	for _, cur := range []string{stored, `{"apiVersion":"bench.example.dev/v1","kind":"Probe"}`, `{"kind":"Probe","metadata":"x","status":1}`, ""} {
		for _, sub := range []string{"", "status"} {
			var m map[string]any
			if cur != "" {
				m = jsonCopy(t, map[string]any{"o": json.RawMessage(cur)})["o"].(map[string]any)
			}
			before := jsonCopy(t, map[string]any{"o": m})
			q := &request{res: probe, namespace: "shop", name: "a", sub: sub}
			got, want := s.liveView(q, m), s.liveObject(q, m).Object
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, subresource %q: liveView gives %v, liveObject %v", cur, sub, got, want)
			}
			if after := jsonCopy(t, map[string]any{"o": m}); !reflect.DeepEqual(before, after) {
				t.Errorf("%s: liveView changed the object it read", cur)
			}
		}
	}
}

// trackedKey writes the field manager, the manager's name and the second
// as fmt's "%p\x00%q\x00%d\x00" would, and the verbatim fields as their
// JSON (the second side as '=' when it is the same value), whatever the
// buffer it reuses held before; the memo finds a key by its bytes without
// making a string of them.
func TestTrackedKeyPrefixAndVerbatim(t *testing.T) {
	fm := new(managedfields.FieldManager)
	now := time.Unix(1_700_000_000, 0)
	mf := []any{map[string]any{"manager": "crbench \"x\"", "operation": "Update", "time": "2026-01-02T03:04:05Z", "n": 1.0}}
	mf2 := []any{map[string]any{"manager": "crbench \"x\"", "operation": "Update", "time": "2026-01-02T03:04:05Z", "n": 1.0}}
	other := []any{map[string]any{"manager": "crbench \"x\"", "operation": "Update", "time": "2026-01-02T03:04:06Z", "n": 1.0}}
	live := map[string]any{"metadata": map[string]any{"name": "a", "managedFields": mf}}
	j, _ := json.Marshal(mf)
	for _, tc := range []struct {
		next any
		want string
	}{
		{mf2, string(j) + "="},
		{other, string(j) + mustJSON(t, other)},
		{[]any{int64(1)}, string(j) + "[1]"},
	} {
		next := map[string]any{"metadata": map[string]any{"name": "a", "managedFields": tc.next, "annotations": map[string]any{"k": "<v>"}}}
		for range 3 {
			b := keyBuffer()
			b.WriteString("left over from an earlier key")
			b.Reset()
			key := string(trackedKey(b, fm, "crbench \"x\"\u2028", now, live, next))
			putKeyBuffer(b)
			want := fmt.Sprintf("%p\x00%q\x00%d\x00", fm, "crbench \"x\"\u2028", now.Unix())
			if !strings.HasPrefix(key, want) {
				t.Fatalf("key %q, want the prefix %q", key, want)
			}
			a, _ := json.Marshal(next["metadata"].(map[string]any)["annotations"])
			if !strings.Contains(key, `"managedFields"V`+tc.want+",") || !strings.Contains(key, `"annotations"V<absent>`+string(a)) {
				t.Fatalf("key %q: want the managedFields %s and the annotations %s", key, tc.want, a)
			}
		}
	}
	memo := newTrackedMemo(4)
	memo.put("k\x00ey", trackedResult{ok: true})
	key := []byte("k\x00ey")
	if r, ok := getByBytes(memo, key); !ok || !r.ok {
		t.Fatal("a key put is not found by its bytes")
	}
	if n := testing.AllocsPerRun(100, func() { getByBytes(memo, key) }); n != 0 {
		t.Fatalf("finding a key by its bytes allocates %v times", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
