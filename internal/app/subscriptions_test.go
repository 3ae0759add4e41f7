package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// signingKey is the HMAC key the test's Secret holds.
const signingKey = "sink-signing-key-0123456789"

// sink is an HTTP endpoint that records the CloudEvents it accepts and
// checks each signature; fail decides, per request, to answer with an
// error instead.
type sink struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	got  []subscription.Event
	raw  []string
	bad  []string // signature failures
	fail func(n int) int
	n    int
	slow time.Duration
}

func newSink(t *testing.T, fail func(n int) int, slow time.Duration) *sink {
	s := &sink{t: t, fail: fail, slow: slow}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if s.slow > 0 {
		time.Sleep(s.slow)
	}
	if s.fail != nil {
		if code := s.fail(n); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	var e subscription.Event
	if err := json.Unmarshal(body, &e); err != nil {
		s.t.Errorf("sink: bad body %q: %v", body, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := subscription.Verify([]byte(signingKey), r.Header.Get(subscription.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		s.bad = append(s.bad, err.Error())
	}
	s.got = append(s.got, e)
	s.raw = append(s.raw, string(body))
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) events() []subscription.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]subscription.Event(nil), s.got...)
}

// logEvents lists the sequences of the log's events of ConfigMaps and
// Secrets in namespace ns after seq, by key.
func logEvents(t *testing.T, a *app.App, after uint64, kinds ...string) map[string][]uint64 {
	t.Helper()
	out := map[string][]uint64{}
	err := a.Log().Read(context.Background(), events.ReadOptions{From: after + 1}, func(m events.Message) error {
		ev, err := m.Event()
		if err != nil {
			return err
		}
		k := ev.GetKey()
		for _, kind := range kinds {
			if k.GetKind() == kind && k.GetNamespace() == "ns" {
				key := k.GetKind() + "/" + k.GetName()
				out[key] = append(out[key], ev.GetSequence())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkDelivered waits until s has every event of want, then checks
// order per object and the object carried after each event.
func checkDelivered(t *testing.T, name string, s *sink, want map[string][]uint64) {
	t.Helper()
	deadline := time.Now().Add(wait * 2)
	for {
		byKey := map[string][]uint64{}
		for _, e := range s.events() {
			k := e.Data.Key.Kind + "/" + e.Data.Key.Name
			byKey[k] = append(byKey[k], e.Data.Sequence)
		}
		missing := 0
		for k, seqs := range want {
			have := map[uint64]bool{}
			for _, q := range byKey[k] {
				have[q] = true
			}
			for _, q := range seqs {
				if !have[q] {
					missing++
				}
			}
		}
		if missing == 0 {
			for k, seqs := range byKey {
				for i := 1; i < len(seqs); i++ {
					if seqs[i] < seqs[i-1] {
						t.Errorf("%s: %s delivered out of order: %v", name, k, seqs)
						break
					}
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d changes never delivered (want %v, got %v)", name, missing, want, byKey)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range s.events() {
		if e.SpecVersion != "1.0" || e.Source != subscription.Source || e.ID == "" || !strings.HasPrefix(e.Type, subscription.TypePrefix) {
			t.Errorf("%s: not a CloudEvent: %+v", name, e)
		}
		if e.Data.Type == "Applied" {
			var obj struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(e.Data.Object, &obj); err != nil || obj.Metadata.ResourceVersion != strconv.FormatUint(e.Data.Sequence, 10) {
				t.Errorf("%s: event %d carries the object at resourceVersion %q, not the one right after it", name, e.Data.Sequence, obj.Metadata.ResourceVersion)
			}
		}
	}
	if len(s.bad) > 0 {
		t.Errorf("%s: %d deliveries with a bad signature: %v", name, len(s.bad), s.bad[0])
	}
}

func subscriptionYAML(name, url, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Subscription
metadata: {name: %s, namespace: ns}
spec:
  sink: {url: %q, allowHTTP: true, signingSecret: {name: hook-key, key: key}}
  filter: {kinds: [ConfigMap, Secret], namespaces: [ns]}
%s`, name, url, extra)
}

func secretYAML(name, key, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: ns}\ndata: {%s: %s}\n", name, key, base64.StdEncoding.EncodeToString([]byte(value)))
}

func TestSubscriptionsDeliverEveryChange(t *testing.T) {
	a, c := startApp(t, app.Config{SubscriptionPrivateSinks: true})
	ctx := context.Background()
	mustApply(t, c, secretYAML("hook-key", "key", signingKey))

	fast := newSink(t, nil, 0)
	slow := newSink(t, nil, 30*time.Millisecond)
	// Answers 500 to its first twelve requests, then recovers.
	flaky := newSink(t, func(n int) int {
		if n <= 12 {
			return http.StatusInternalServerError
		}
		return 0
	}, 0)
	// Down (503) for its first two seconds, then up: the sink stopped
	// for a while.
	downSince := time.Now()
	down := newSink(t, func(int) int {
		if time.Since(downSince) < 2*time.Second {
			return http.StatusServiceUnavailable
		}
		return 0
	}, 0)
	mustApply(t, c, subscriptionYAML("fast", fast.srv.URL, "")+"---\n"+
		subscriptionYAML("slow", slow.srv.URL, "  maxInFlight: 4\n")+"---\n"+
		subscriptionYAML("flaky", flaky.srv.URL, "")+"---\n"+
		subscriptionYAML("down", down.srv.URL, ""))
	start := resourceVersion(t, c)

	// Changes: creates, updates, deletes, and a Secret whose value must
	// never reach a sink.
	const secretValue = "hunter2-never-delivered"
	var docs []string
	for i := range 20 {
		docs = append(docs, cm(fmt.Sprintf("c%d", i), "app: web", fmt.Sprintf("v: \"%d\"", i)))
	}
	mustApply(t, c, strings.Join(docs, "---\n"))
	for i := range 5 {
		mustApply(t, c, cm(fmt.Sprintf("c%d", i), "app: web", "v: changed"))
	}
	mustApply(t, c, secretYAML("db", "password", secretValue))
	for i := 15; i < 20; i++ {
		mustDelete(t, c, key(fmt.Sprintf("c%d", i)))
	}
	// A change outside the filter.
	mustApply(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: elsewhere, namespace: other}\ndata: {a: b}\n")

	want := logEvents(t, a, start, "ConfigMap", "Secret")
	if len(want) < 21 {
		t.Fatalf("expected events for 21 objects in the log, got %d", len(want))
	}
	for name, s := range map[string]*sink{"fast": fast, "slow": slow, "flaky": flaky, "down": down} {
		checkDelivered(t, name, s, want)
		for _, raw := range s.raw {
			if strings.Contains(raw, secretValue) || strings.Contains(raw, base64.StdEncoding.EncodeToString([]byte(secretValue))) {
				t.Fatalf("%s: a delivery holds the Secret's value: %s", name, raw)
			}
			if strings.Contains(raw, `"other"`) {
				t.Fatalf("%s: a change outside the filter was delivered: %s", name, raw)
			}
		}
	}

	// The status keeps the place and the counters.
	last := uint64(0)
	for _, seqs := range want {
		last = max(last, seqs[len(seqs)-1])
	}
	deadline := time.Now().Add(wait)
	for {
		raw, err := c.Get(ctx, api.Key{Kind: "Subscription", Namespace: "ns", Name: "flaky"})
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Status struct {
				Phase   string `json:"phase"`
				Details struct {
					Delivered string `json:"delivered"`
					Count     string `json:"count"`
					Failures  string `json:"failures"`
				} `json:"details"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		d, _ := strconv.ParseUint(obj.Status.Details.Delivered, 10, 64)
		f, _ := strconv.ParseUint(obj.Status.Details.Failures, 10, 64)
		if d >= last && obj.Status.Phase == "Delivering" {
			if f == 0 {
				t.Errorf("flaky sink: status counts no failures: %s", raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reached delivered >= %d: %s", last, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSubscriptionParksWhenTheSinkStaysDownAndResumesWhereItStopped(t *testing.T) {
	a, c := startApp(t, app.Config{SubscriptionPrivateSinks: true})
	ctx := context.Background()
	mustApply(t, c, secretYAML("hook-key", "key", signingKey))
	var up sync.Map
	s := newSink(t, func(int) int {
		if _, ok := up.Load("up"); ok {
			return 0
		}
		return http.StatusServiceUnavailable
	}, 0)
	mustApply(t, c, subscriptionYAML("hook", s.srv.URL, "  failAfter: 1s\n"))
	start := resourceVersion(t, c)
	mustApply(t, c, cm("first", "", "a: b"))
	phase := func() (string, string) {
		raw, err := c.Get(ctx, api.Key{Kind: "Subscription", Namespace: "ns", Name: "hook"})
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Status struct {
				Phase   string `json:"phase"`
				Details struct {
					Delivered string `json:"delivered"`
				} `json:"details"`
			} `json:"status"`
		}
		_ = json.Unmarshal(raw, &obj)
		return obj.Status.Phase, obj.Status.Details.Delivered
	}
	deadline := time.Now().Add(wait)
	for {
		p, d := phase()
		if p == "Failed" {
			// The place may pass the subscription's own status (it matches
			// no filter), which lands before or after start, but never the
			// ConfigMap it could not deliver.
			first := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "first"}).GetMetadata().GetResourceVersion()
			if n, err := strconv.ParseUint(d, 10, 64); err != nil || n >= first {
				t.Fatalf("failed subscription's place moved: delivered %s, want before %d (the undelivered ConfigMap)", d, first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscription never turned Failed (phase %q)", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Changes while parked, then the sink comes back and the spec changes.
	mustApply(t, c, cm("second", "", "a: b"))
	up.Store("up", true)
	mustApply(t, c, subscriptionYAML("hook", s.srv.URL, "  failAfter: 1h\n"))
	checkDelivered(t, "hook", s, logEvents(t, a, start, "ConfigMap"))
}

func TestSubscribeFromTheStartThenFollows(t *testing.T) {
	_, c := startApp(t, app.Config{})
	for i := range 3 {
		mustApply(t, c, cm(fmt.Sprintf("old%d", i), "", "a: b"))
	}
	mustApply(t, c, "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan api.SubscribeEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.Subscribe(ctx, api.SubscribeOptions{From: "0", Kinds: []string{"cm"}, Follow: true}, func(e api.SubscribeEvent) error {
			got <- e
			return nil
		})
	}()
	names := func(n int) []string {
		var out []string
		for range n {
			select {
			case e := <-got:
				var ev subscription.Event
				if err := json.Unmarshal(e.Raw, &ev); err != nil {
					t.Fatal(err)
				}
				out = append(out, ev.Data.Key.Kind+"/"+ev.Data.Key.Name)
			case err := <-done:
				t.Fatalf("subscribe ended: %v", err)
			case <-time.After(wait):
				t.Fatalf("only %v", out)
			}
		}
		return out
	}
	if got := strings.Join(names(3), ","); got != "ConfigMap/old0,ConfigMap/old1,ConfigMap/old2" {
		t.Fatalf("from the start: %s", got)
	}
	mustApply(t, c, cm("new", "", "a: b"))
	if got := strings.Join(names(1), ","); got != "ConfigMap/new" {
		t.Fatalf("follow: %s", got)
	}
}

func TestSubscriptionSeesOnlyItsCreatorsNamespaces(t *testing.T) {
	a, admin := startApp(t, app.Config{SubscriptionPrivateSinks: true, Principals: []api.Principal{
		{Token: "admin-token", Name: "root"},
		{Token: "shop-token", Name: "shopper", Role: api.RoleWriter, Namespaces: []string{"ns"}},
	}})
	admin.Token = "admin-token"
	shop := &api.Client{BaseURL: a.URL(), Token: "shop-token"}
	s := newSink(t, nil, 0)
	hook := func(extra string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Subscription\nmetadata: {name: hook, namespace: ns}\nspec:\n  sink: {url: %q, allowHTTP: true, signingSecret: {name: hook-key, key: key}}\n%s", s.srv.URL, extra)
	}
	mustApply(t, shop, secretYAML("hook-key", "key", signingKey))
	// A filter that reaches beyond the creator's namespaces is refused,
	// and so is one that names none (every namespace).
	for _, extra := range []string{"", "  filter: {namespaces: [ns, other]}\n"} {
		_, err := shop.Apply(context.Background(), "hook.yaml", []byte(hook(extra)), "")
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden || !strings.Contains(err.Error(), "spec.filter.namespaces") && !strings.Contains(err.Error(), "would read namespace other") {
			t.Fatalf("subscription with %q: %v, want 403 naming the filter", extra, err)
		}
	}
	mustApply(t, shop, hook("  filter: {namespaces: [ns]}\n"))
	start := resourceVersion(t, admin)
	mustApply(t, admin, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, namespace: other}\ndata: {a: b}\n")
	mustApply(t, admin, cm("ours", "", "a: b"))
	checkDelivered(t, "hook", s, logEvents(t, a, start, "ConfigMap"))
	for _, e := range s.events() {
		if e.Data.Key.Namespace != "ns" {
			t.Fatalf("a change of namespace %q reached the shop's subscription", e.Data.Key.Namespace)
		}
	}
}
