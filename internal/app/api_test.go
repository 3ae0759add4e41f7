package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/schemas"
)

// wait is how long a test waits for something that should happen at once.
const wait = 30 * time.Second

func cm(name, labels, data string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: ns, labels: {%s}}\ndata: {%s}\n", name, labels, data)
}

func key(name string) api.Key { return api.Key{Kind: "ConfigMap", Namespace: "ns", Name: name} }

func mustApply(t testing.TB, c *api.Client, yaml string) *api.ApplyResponse {
	t.Helper()
	resp, err := c.Apply(context.Background(), "test.yaml", []byte(yaml), "")
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return resp
}

func mustDelete(t *testing.T, c *api.Client, k api.Key) {
	t.Helper()
	if _, err := c.Delete(context.Background(), k); err != nil {
		t.Fatalf("delete %v: %v", k, err)
	}
}

func resourceVersion(t *testing.T, c *api.Client) uint64 {
	t.Helper()
	l, err := c.List(context.Background(), api.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

func count(t *testing.T, a *app.App) uint64 {
	t.Helper()
	n, err := a.Log().Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startWatch runs c.Watch until the test ends and returns its events.
func startWatch(t *testing.T, c *api.Client, q api.Query, from uint64) <-chan api.WatchEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan api.WatchEvent)
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, q, from, func(e api.WatchEvent) error {
			select {
			case ch <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("watch ended with %v, want context.Canceled", err)
		}
	})
	return ch
}

// got is a watch event in a comparable form: "TYPE name".
func got(e api.WatchEvent) string { return e.Type + " " + e.Key.Name }

// expectEvents reads len(want) events and checks them in order. It returns
// them for closer checks.
func expectEvents(t *testing.T, ch <-chan api.WatchEvent, want ...string) []api.WatchEvent {
	t.Helper()
	var evs []api.WatchEvent
	var names []string
	deadline := time.After(wait)
	for len(evs) < len(want) {
		select {
		case e := <-ch:
			evs = append(evs, e)
			names = append(names, got(e))
		case <-deadline:
			t.Fatalf("after %s: got %q, want %q", wait, names, want)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("got %q, want %q", names, want)
	}
	return evs
}

// expectEnd applies a new object named name with labels and expects its
// ADDED to be the next event: nothing else was pending on the watch.
func expectEnd(t *testing.T, c *api.Client, ch <-chan api.WatchEvent, name, labels string) {
	t.Helper()
	mustApply(t, c, cm(name, labels, ""))
	expectEvents(t, ch, "ADDED "+name)
}

// dataV is a ConfigMap's data.v (the decoder stores data under spec).
func dataV(o *schemas.Object) string {
	return o.GetSpec().GetFields()["data"].GetStructValue().GetFields()["v"].GetStringValue()
}

func decodeObject(t *testing.T, raw json.RawMessage) *schemas.Object {
	t.Helper()
	o, err := api.DecodeObject(raw)
	if err != nil {
		t.Fatalf("decode object %s: %v", raw, err)
	}
	return o
}

// TestWatchFromZero watches from resourceVersion 0: the existing objects
// come first as ADDED, then changes as they happen.
func TestWatchFromZero(t *testing.T) {
	_, c := startApp(t, app.Config{})
	mustApply(t, c, cm("b", "app: web", "v: '1'")+"---\n"+cm("a", "app: web", "v: '1'"))
	ch := startWatch(t, c, api.Query{Namespace: "ns"}, 0)
	// The initial objects come oldest change first, each with its own
	// resourceVersion: a stream broken after any of them resumes from its
	// id and misses nothing (every object not yet sent changed later).
	initial := expectEvents(t, ch, "ADDED b", "ADDED a")
	for _, e := range initial {
		if o := decodeObject(t, e.Object); o.Metadata.Generation != 1 {
			t.Errorf("%s: object at generation %d, want 1", got(e), o.Metadata.Generation)
		}
	}
	if initial[0].ResourceVersion != 1 || initial[1].ResourceVersion != 2 {
		t.Errorf("initial list resourceVersions = %d, %d; want 1, 2", initial[0].ResourceVersion, initial[1].ResourceVersion)
	}
	resumed := startWatch(t, c, api.Query{Namespace: "ns"}, initial[0].ResourceVersion)
	expectEvents(t, resumed, "ADDED a")
	mustApply(t, c, cm("a", "app: web", "v: '2'"))
	mod := expectEvents(t, ch, "MODIFIED a")[0]
	if o := decodeObject(t, mod.Object); o.Metadata.Generation != 2 || dataV(o) != "2" {
		t.Errorf("MODIFIED a carries %v, want generation 2 with v=2", o)
	}
	mustApply(t, c, cm("c", "", "v: '1'"))
	expectEvents(t, ch, "ADDED c")
	mustDelete(t, c, key("b"))
	// The delete request, then the finalization that removes the key.
	del := expectEvents(t, ch, "MODIFIED b", "DELETED b")
	if o := decodeObject(t, del[0].Object); o.Metadata.DeletionTime == nil || o.Status.GetGoal() != "deleted" {
		t.Errorf("MODIFIED b before DELETED carries %v, want a deletionTime and goal deleted", o)
	}
	if del[1].ResourceVersion <= del[0].ResourceVersion || del[0].ResourceVersion <= mod.ResourceVersion {
		t.Errorf("resourceVersions %d, %d, %d do not increase", mod.ResourceVersion, del[0].ResourceVersion, del[1].ResourceVersion)
	}
	expectEnd(t, c, ch, "sentinel", "")
}

// TestWatchResume resumes a watch from a resourceVersion: it yields exactly
// the changes after it.
func TestWatchResume(t *testing.T) {
	_, c := startApp(t, app.Config{})
	mustApply(t, c, cm("a", "", "v: '1'"))
	r := resourceVersion(t, c)
	mustApply(t, c, cm("a", "", "v: '2'"))
	mustApply(t, c, cm("b", "", "v: '1'"))
	mustDelete(t, c, key("a"))

	ch := startWatch(t, c, api.Query{}, r)
	evs := expectEvents(t, ch, "MODIFIED a", "ADDED b", "MODIFIED a", "DELETED a")
	last := r
	for _, e := range evs {
		if e.ResourceVersion <= last {
			t.Errorf("%s at %d, want after %d", got(e), e.ResourceVersion, last)
		}
		last = e.ResourceVersion
	}
	expectEnd(t, c, ch, "sentinel", "")

	// Resuming from the middle yields the rest.
	mid := startWatch(t, c, api.Query{}, evs[1].ResourceVersion)
	expectEvents(t, mid, "MODIFIED a", "DELETED a", "ADDED sentinel")
	expectEnd(t, c, mid, "sentinel2", "")
}

// rawGet sends a GET with optional headers and returns the status and body.
func rawGet(t *testing.T, u string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestWatchBadRequest sends watches the server must refuse at once.
func TestWatchBadRequest(t *testing.T) {
	a, _ := startApp(t, app.Config{})
	tests := []struct {
		name     string
		query    string
		hdr      map[string]string
		wantCode int
		want     string
	}{
		{"resourceVersion not a number", "resourceVersion=abc", nil, http.StatusBadRequest, `resourceVersion: "abc"`},
		{"negative resourceVersion", "resourceVersion=-1", nil, http.StatusBadRequest, `resourceVersion: "-1"`},
		{"Last-Event-ID not a number", "", map[string]string{"Last-Event-ID": "abc"}, http.StatusBadRequest, `resourceVersion: "abc"`},
		{"bad label selector", "labelSelector=" + url.QueryEscape("app in (web"), nil, http.StatusBadRequest, "label selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawGet(t, a.URL()+"/v1/watch?"+tt.query, tt.hdr)
			if code != tt.wantCode {
				t.Errorf("status %d, want %d (body %s)", code, tt.wantCode, body)
			}
			var er api.ErrorResponse
			if err := json.Unmarshal([]byte(body), &er); err != nil || !strings.Contains(er.Error, tt.want) {
				t.Errorf("body %s, want a JSON error containing %q", body, tt.want)
			}
		})
	}
	// Through the client, the refusal is an *APIError and the watch ends.
	c := &api.Client{BaseURL: a.URL()}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := c.Watch(ctx, api.Query{LabelSelector: "=x"}, 0, func(api.WatchEvent) error { return nil })
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest {
		t.Errorf("client watch: %v, want an APIError with code 400", err)
	}
}

func itemNames(t *testing.T, l *api.ListResponse) []string {
	t.Helper()
	var names []string
	for _, raw := range l.Items {
		names = append(names, decodeObject(t, raw).Metadata.Name)
	}
	return names
}

// TestLabelSelector filters lists and watches by label.
func TestLabelSelector(t *testing.T) {
	_, c := startApp(t, app.Config{})
	mustApply(t, c, cm("web", "app: web, tier: front", "v: '1'")+"---\n"+
		cm("api", "app: api, tier: back", "v: '1'")+"---\n"+
		cm("db", "app: db, tier: back", "v: '1'")+"---\n"+
		cm("plain", "", "v: '1'"))
	tests := []struct {
		selector string
		want     []string
	}{
		{"", []string{"api", "db", "plain", "web"}},
		{"tier=back", []string{"api", "db"}},
		{"tier==front", []string{"web"}},
		{"tier!=back", []string{"plain", "web"}},
		{"app in (web, db)", []string{"db", "web"}},
		{"app notin (web,db),tier", []string{"api"}},
		{"tier", []string{"api", "db", "web"}},
		{"!tier", []string{"plain"}},
		{"tier=back,app=db", []string{"db"}},
		{"app=nothing", nil},
	}
	for _, tt := range tests {
		t.Run("list "+tt.selector, func(t *testing.T) {
			l, err := c.List(context.Background(), api.Query{LabelSelector: tt.selector})
			if err != nil {
				t.Fatal(err)
			}
			if names := itemNames(t, l); !slices.Equal(names, tt.want) {
				t.Errorf("got %q, want %q", names, tt.want)
			}
		})
	}
	t.Run("list bad selector", func(t *testing.T) {
		_, err := c.List(context.Background(), api.Query{LabelSelector: "app in (web"})
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest {
			t.Errorf("err %v, want an APIError with code 400", err)
		}
	})
	t.Run("watch", func(t *testing.T) {
		ch := startWatch(t, c, api.Query{LabelSelector: "tier=back"}, 0)
		expectEvents(t, ch, "ADDED api", "ADDED db")
		// Changes to objects outside the selector are not sent.
		mustApply(t, c, cm("web", "app: web, tier: front", "v: '2'"))
		mustApply(t, c, cm("plain", "", "v: '2'"))
		mustApply(t, c, cm("db", "app: db, tier: back", "v: '2'"))
		expectEvents(t, ch, "MODIFIED db")
		mustApply(t, c, cm("queue", "tier: back", ""))
		expectEvents(t, ch, "ADDED queue")
		mustDelete(t, c, key("web"))
		mustDelete(t, c, key("api"))
		expectEvents(t, ch, "MODIFIED api", "DELETED api")
		mustApply(t, c, cm("other", "tier: front", ""))
		expectEnd(t, c, ch, "sentinel", "tier: back")
	})
}

// TestNotFound asks about keys that do not exist.
func TestNotFound(t *testing.T) {
	_, c := startApp(t, app.Config{})
	mustApply(t, c, cm("here", "", ""))
	ctx := context.Background()
	missing := key("nope")
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"get", func() error { _, err := c.Get(ctx, missing); return err }, "ConfigMap/ns/nope not found"},
		{"get in another namespace", func() error {
			_, err := c.Get(ctx, api.Key{Kind: "ConfigMap", Namespace: "other", Name: "here"})
			return err
		}, "ConfigMap/other/here not found"},
		{"delete", func() error { _, err := c.Delete(ctx, missing); return err }, "ConfigMap/ns/nope"},
		{"history", func() error { _, err := c.History(ctx, missing); return err }, "ConfigMap/ns/nope has no history"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var apiErr *api.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v, want an APIError", err)
			}
			if apiErr.Code != http.StatusNotFound {
				t.Errorf("status %d, want 404", apiErr.Code)
			}
			if !strings.Contains(apiErr.Error(), tt.want) {
				t.Errorf("message %q does not contain %q", apiErr.Error(), tt.want)
			}
		})
	}
}

// TestHistoryOutlivesDeletion deletes an object and applies it again: the
// key's history keeps every event, and the new object is a new one.
func TestHistoryOutlivesDeletion(t *testing.T) {
	_, c := startApp(t, app.Config{})
	ctx := context.Background()
	first := decodeObject(t, mustApply(t, c, cm("web", "", "v: '1'")).Results[0].Object)
	mustDelete(t, c, key("web"))
	again := mustApply(t, c, cm("web", "", "v: '1'")).Results[0]
	if again.Action != "created" {
		t.Errorf("re-apply after delete: %q, want created", again.Action)
	}
	if o := decodeObject(t, again.Object); o.Metadata.Uid == first.Metadata.Uid || o.Metadata.Generation != 1 {
		t.Errorf("re-created object has uid %q (first %q) and generation %d; want a new uid and 1", o.Metadata.Uid, first.Metadata.Uid, o.Metadata.Generation)
	}
	h, err := c.History(ctx, key("web"))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, raw := range h.Events {
		ev, err := api.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type.String())
	}
	want := []string{"EVENT_TYPE_APPLIED", "EVENT_TYPE_DELETE_REQUESTED", "EVENT_TYPE_FINALIZED", "EVENT_TYPE_APPLIED"}
	if !slices.Equal(types, want) {
		t.Errorf("history %q, want %q", types, want)
	}
}

// TestStateAt asks for the state as of a sequence and a time.
func TestStateAt(t *testing.T) {
	a, c := startApp(t, app.Config{})
	ctx := context.Background()
	mustApply(t, c, cm("a", "", "v: '1'"))
	first := resourceVersion(t, c)
	between := time.Now()
	for !time.Now().After(between) {
		// The clock must move on, so the next event is stored after it.
		time.Sleep(time.Millisecond)
	}
	mustApply(t, c, cm("a", "", "v: '2'")+"---\n"+cm("b", "", "v: '1'"))
	head := resourceVersion(t, c)

	check := func(t *testing.T, at string, wantSeq uint64, want map[string]string) {
		t.Helper()
		l, err := c.StateAt(ctx, at, api.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if l.ResourceVersion != wantSeq {
			t.Errorf("resourceVersion %d, want %d", l.ResourceVersion, wantSeq)
		}
		gotState := map[string]string{}
		for _, raw := range l.Items {
			o := decodeObject(t, raw)
			gotState[o.Metadata.Name] = dataV(o)
		}
		if fmt.Sprint(gotState) != fmt.Sprint(want) {
			t.Errorf("state %v, want %v", gotState, want)
		}
	}
	t.Run("at the first sequence", func(t *testing.T) { check(t, strconv.FormatUint(first, 10), first, map[string]string{"a": "1"}) })
	t.Run("at the head", func(t *testing.T) {
		check(t, strconv.FormatUint(head, 10), head, map[string]string{"a": "2", "b": "1"})
	})
	t.Run("at 0", func(t *testing.T) { check(t, "0", 0, map[string]string{}) })
	t.Run("at a time between the applies", func(t *testing.T) {
		check(t, between.Format(time.RFC3339Nano), first, map[string]string{"a": "1"})
	})
	t.Run("at a time after the applies", func(t *testing.T) {
		check(t, time.Now().Format(time.RFC3339Nano), head, map[string]string{"a": "2", "b": "1"})
	})
	bad := []struct {
		name, at, want string
	}{
		{"sequence past the head", strconv.FormatUint(head+1, 10), fmt.Sprintf("sequence %d is past the newest event (%d)", head+1, head)},
		{"neither sequence nor time", "yesterday", `at: "yesterday" is neither`},
		{"empty", "", "is neither"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.StateAt(ctx, tt.at, api.Query{})
			var apiErr *api.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest {
				t.Fatalf("err %v, want an APIError with code 400", err)
			}
			if !strings.Contains(apiErr.Error(), tt.want) {
				t.Errorf("message %q does not contain %q", apiErr.Error(), tt.want)
			}
		})
	}
	if n := count(t, a); n != head {
		t.Errorf("the log holds %d events, want %d (state queries write nothing)", n, head)
	}
}

// TestAuth runs the API with a token: requests without it are refused, and
// events record the token's user.
func TestAuth(t *testing.T) {
	a, anon := startApp(t, app.Config{Tokens: map[string]string{"t1": "alice"}})
	ctx := context.Background()
	refused := []struct {
		name string
		c    *api.Client
	}{
		{"no token", anon},
		{"unknown token", &api.Client{BaseURL: a.URL(), Token: "t2"}},
		{"token differs in case", &api.Client{BaseURL: a.URL(), Token: "T1"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			calls := map[string]func() error{
				"apply":   func() error { _, err := tt.c.Apply(ctx, "x", []byte(cm("web", "", "")), ""); return err },
				"list":    func() error { _, err := tt.c.List(ctx, api.Query{}); return err },
				"history": func() error { _, err := tt.c.History(ctx, key("web")); return err },
				"watch": func() error {
					return tt.c.Watch(ctx, api.Query{}, 0, func(api.WatchEvent) error { return nil })
				},
			}
			for name, call := range calls {
				var apiErr *api.APIError
				if err := call(); !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized {
					t.Errorf("%s: %v, want an APIError with code 401", name, err)
				}
			}
		})
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("refused requests wrote %d events", n)
	}
	alice := &api.Client{BaseURL: a.URL(), Token: "t1"}
	mustApply(t, alice, cm("web", "", "v: '1'"))
	if _, err := alice.Delete(ctx, key("web")); err != nil {
		t.Fatal(err)
	}
	h, err := alice.History(ctx, key("web"))
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, raw := range h.Events {
		ev, err := api.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		actors = append(actors, ev.Actor)
	}
	if want := []string{"user/alice", "user/alice", "jetplane/finalizer"}; !slices.Equal(actors, want) {
		t.Errorf("actors %q, want %q", actors, want)
	}
	// Probes stay open: an orchestrator has no token.
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := rawGet(t, a.URL()+path, nil); code != http.StatusOK {
			t.Errorf("%s without a token: %d %s, want 200", path, code, body)
		}
	}
}

// TestHealthAndMetrics checks the probes and the metrics endpoint.
func TestHealthAndMetrics(t *testing.T) {
	a, c := startApp(t, app.Config{})
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := rawGet(t, a.URL()+path, nil)
		if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("%s: %d %q, want 200 ok", path, code, body)
		}
	}
	mustApply(t, c, cm("web", "", ""))
	mustApply(t, c, cm("db", "", ""))
	if _, err := c.Apply(context.Background(), "empty.yaml", nil, ""); err == nil {
		t.Fatal("an apply without objects succeeded")
	}
	code, body := rawGet(t, a.URL()+"/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`jetplane_api_requests_total{code="200",route="/v1/apply"} 2`,
		`jetplane_api_requests_total{code="400",route="/v1/apply"} 1`,
		"jetplane_projection_sequence 2",
		"jetplane_projection_objects 2",
		"jetplane_api_request_seconds",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestIdempotencyKeyHeader repeats an apply with one Idempotency-Key, one
// after the other and all at once: its events are stored once.
func TestIdempotencyKeyHeader(t *testing.T) {
	a, c := startApp(t, app.Config{})
	ctx := context.Background()
	body := []byte(cm("web", "", "v: '1'") + "---\n" + cm("api", "", "v: '1'"))
	for i := range 2 {
		resp, err := c.Apply(ctx, "x", body, "deploy-42")
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if len(resp.Results) != 2 {
			t.Fatalf("apply %d: %d results, want 2", i, len(resp.Results))
		}
	}
	if n := count(t, a); n != 2 {
		t.Errorf("the log holds %d events after two applies with one key, want 2", n)
	}

	body = []byte(cm("web", "", "v: '2'") + "---\n" + cm("api", "", "v: '2'"))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Apply(ctx, "x", body, "deploy-43") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent apply %d: %v", i, err)
		}
	}
	if n := count(t, a); n != 4 {
		t.Errorf("the log holds %d events after concurrent applies with one key, want 4", n)
	}
	for _, name := range []string{"web", "api"} {
		raw, err := c.Get(ctx, key(name))
		if err != nil {
			t.Fatal(err)
		}
		if o := decodeObject(t, raw); o.Metadata.Generation != 2 || dataV(o) != "2" {
			t.Errorf("%s: %v, want generation 2 with v=2", name, o)
		}
	}
}

// TestWatchSelectorTransitions: an object whose labels move it into a
// watched selection is ADDED for that watcher, one moving out is DELETED.
func TestWatchSelectorTransitions(t *testing.T) {
	_, c := startApp(t, app.Config{})
	mustApply(t, c, cm("a", "app: web", "v: '1'"))
	ch := startWatch(t, c, api.Query{Namespace: "ns", LabelSelector: "app=web"}, 0)
	expectEvents(t, ch, "ADDED a")
	mustApply(t, c, cm("a", "app: api", "v: '1'"))
	expectEvents(t, ch, "DELETED a")
	mustApply(t, c, cm("a", "app: api", "v: '2'"))
	mustApply(t, c, cm("a", "app: web", "v: '2'"))
	expectEvents(t, ch, "ADDED a")
	mustApply(t, c, cm("a", "app: web", "v: '3'"))
	expectEvents(t, ch, "MODIFIED a")
}
