package kubeapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// TestShownOnceForAnswerAndWatch: a write's answer and the watch event of
// the same write share one showing of the object, and each is what
// encoding the object on its own makes of it; a change of the object is
// shown anew, and an object with an owner is never shared.
func TestShownOnceForAnswerAndWatch(t *testing.T) {
	st := projections.NewStore(projections.StoreOptions{})
	s := &Server{cfg: Config{Store: st, Logger: slog.New(slog.DiscardHandler)}}
	res, ok := s.served().find("", "v1", "configmaps")
	if !ok {
		t.Fatal("configmaps not served")
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps?watch=true", nil)
	q := &request{r: r, res: res, namespace: "ns", caller: Caller{Principal: gate.Principal{Name: "test", Role: gate.RoleAdmin}}}

	apply := func(seq uint64, value string, ann map[string]string) projections.Change {
		ev := configMapApplied(seq, "cm", value)
		for k, v := range ann {
			ev.Object.Metadata.Annotations[k] = v
		}
		st.Apply(ev)
		o := st.Get(projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "cm"})
		typ := projections.Modified
		if seq == 1 {
			typ = projections.Added
		}
		return projections.Change{Sequence: seq, Key: projections.ObjectKey(o), Type: typ, Object: o}
	}
	answer := func(o *schemas.Object) []byte {
		w := httptest.NewRecorder()
		if err := s.showJSON(w, q, http.StatusOK, o); err != nil {
			t.Fatal(err)
		}
		return w.Body.Bytes()
	}
	check := func(ch projections.Change, shared bool) {
		t.Helper()
		want, err := json.Marshal(s.show(q, ch.Object))
		if err != nil {
			t.Fatal(err)
		}
		if got := answer(ch.Object); !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("answer at %d:\n got %s\nwant %s", ch.Sequence, got, want)
		}
		sc := s.shownChange(q, ch, false)
		line, _ := json.Marshal(watchEvent{Type: string(ch.Type), Object: s.show(q, ch.Object)})
		if !bytes.Equal(sc.line, append(line, '\n')) {
			t.Fatalf("watch line at %d:\n got %s\nwant %s", ch.Sequence, sc.line, line)
		}
		so := s.shownObject(q, ch.Object)
		if shared != (so != nil) {
			t.Fatalf("at %d: shared %v, want %v", ch.Sequence, so != nil, shared)
		}
		if shared && !sameMap(so.obj, sc.obj) {
			t.Fatalf("at %d: the watch showed the object again", ch.Sequence)
		}
	}
	check(apply(1, "a", nil), true)
	check(apply(2, "b", nil), true)
	check(apply(3, "c", map[string]string{gate.AnnotationOwner: "ConfigMap/ns/other"}), false)
}

// sameMap reports whether a and b are the same map (not equal ones).
func sameMap(a, b map[string]any) bool {
	a["\x00probe"] = true
	defer delete(a, "\x00probe")
	_, ok := b["\x00probe"]
	return ok
}
