package security

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
)

func get(t *testing.T, a *app.App, token, path string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// A token over its request rate gets 429 with Retry-After; other tokens
// are not affected.
func TestAPIRateLimitPerToken(t *testing.T) {
	// One request per 1000 s after a burst of 2: the third is refused
	// however slow the machine.
	a := start(t, app.Config{Principals: principals(), APILimits: api.Limits{Rate: 0.001, Burst: 2}})
	for i := range 2 {
		if resp, body := get(t, a, "reader-token", "/v1/objects"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := get(t, a, "reader-token", "/v1/objects")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d %s, want 429", resp.StatusCode, body)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
	}
	if resp, _ := get(t, a, "admin-token", "/v1/objects"); resp.StatusCode != 200 {
		t.Fatalf("another token: %d, want 200", resp.StatusCode)
	}
}

// A token may hold only so many watches; closing one frees its slot.
func TestAPIWatchesPerToken(t *testing.T) {
	a := start(t, app.Config{Principals: principals(), APILimits: api.Limits{Watches: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer reader-token")
	first, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode != 200 {
		t.Fatalf("first watch: %d", first.StatusCode)
	}
	if resp, body := get(t, a, "reader-token", "/v1/watch"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second watch: %d %s, want 429", resp.StatusCode, body)
	}
	cancel()
	first.Body.Close()
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/v1/watch", nil)
		req.Header.Set("Authorization", "Bearer reader-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		code := resp.StatusCode
		cancel()
		resp.Body.Close()
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch after closing the first: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Lists and histories come in pages that together are the whole answer.
func TestAPIPagination(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	var docs []string
	for i := range 5 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: shop}\ndata: {v: '1'}\n", i))
	}
	if _, err := c.Apply(context.Background(), "x.yaml", []byte(strings.Join(docs, "---\n")), ""); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		if _, err := c.Apply(context.Background(), "x.yaml", []byte(strings.Replace(docs[0], "'1'", fmt.Sprintf("'%d'", i), 1)), ""); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	pages := 0
	path := "/v1/objects?namespace=shop&limit=2"
	for {
		resp, body := get(t, a, "admin-token", path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		var page api.ListResponse
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Items) > 2 {
			t.Fatalf("page of %d items, limit 2", len(page.Items))
		}
		for _, raw := range page.Items {
			o, err := api.DecodeObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, o.GetMetadata().GetName())
		}
		if page.Continue == "" {
			break
		}
		path = "/v1/objects?namespace=shop&limit=2&continue=" + url.QueryEscape(page.Continue)
	}
	if want := "cm-0,cm-1,cm-2,cm-3,cm-4"; pages != 3 || strings.Join(names, ",") != want {
		t.Fatalf("%d pages of %q, want 3 pages of %s", pages, names, want)
	}
	all, err := c.List(context.Background(), api.Query{Namespace: "shop"})
	if err != nil || len(all.Items) != 5 {
		t.Fatalf("client list: %d items, %v", len(all.Items), err)
	}

	resp, body := get(t, a, "admin-token", "/v1/history?kind=ConfigMap&namespace=shop&name=cm-0&limit=2")
	var h api.HistoryResponse
	if err := json.Unmarshal(body, &h); resp.StatusCode != 200 || err != nil || len(h.Events) != 2 || h.Continue == "" {
		t.Fatalf("history page: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, a, "admin-token", "/v1/history?kind=ConfigMap&namespace=shop&name=cm-0&limit=2&continue="+url.QueryEscape(h.Continue))
	var h2 api.HistoryResponse
	if err := json.Unmarshal(body, &h2); resp.StatusCode != 200 || err != nil || len(h2.Events) != 1 || h2.Continue != "" {
		t.Fatalf("last history page: %d %s", resp.StatusCode, body)
	}
	full, err := c.History(context.Background(), api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "cm-0"})
	if err != nil || len(full.Events) != 3 {
		t.Fatalf("client history: %d events, %v", len(full.Events), err)
	}
	if resp, _ := get(t, a, "admin-token", "/v1/objects?continue=garbage!"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged continue token: %d, want 400", resp.StatusCode)
	}
	if resp, _ := get(t, a, "admin-token", "/v1/objects?limit=-1"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("limit -1: %d, want 400", resp.StatusCode)
	}
}

// logsPod applies Pod other/victim bound to node and waits until the pod
// reconciler has recorded its first status, so that the log is still
// afterwards.
func logsPod(t *testing.T, a *app.App, node string) {
	t.Helper()
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: Pod
metadata: {name: victim, namespace: other}
spec:
  nodeName: %s
  restartPolicy: Never
  containers:
  - {name: main, image: "app:v1"}
`, node)
	if _, err := c.Apply(context.Background(), "pod.yaml", []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	k := projections.Key{Kind: "Pod", Namespace: "other", Name: "victim"}
	deadline := time.Now().Add(wait)
	for a.Store().Get(k).GetStatus().GetPhase() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the pod got no status")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openNode connects as node's agent.
func openNode(t *testing.T, a *app.App, node string) *events.NodeConn {
	t.Helper()
	nc, _ := connectAs(t, a, auth.RoleNode, node)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := events.OpenNode(ctx, nc, node)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitLogs waits until JP_LOGS has taken in messages up to sequence seq
// (stored or, over a bound, dropped).
func waitLogs(t *testing.T, a *app.App, seq uint64) {
	t.Helper()
	js, err := jetstream.New(a.Log().Conn())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		s, err := js.Stream(context.Background(), events.LogsStream)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().State.LastSeq >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JP_LOGS at %d, want %d", s.CachedInfo().State.LastSeq, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A node writes logs only for pods bound to it: another node publishing
// under a victim pod's name (10,001 chunks, over the per-container bound)
// neither shows in that pod's logs nor pushes its real output out.
func TestNodeCannotForgeAnotherNodesPodLogs(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	logsPod(t, a, "good")
	good, evil := openNode(t, a, "good"), openNode(t, a, "evil")
	if err := good.PublishLog("other", "victim", "main", "stdout", 0, []byte("real output\n")); err != nil {
		t.Fatal(err)
	}
	if err := flush(good); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, a, 1)
	before := fingerprintOf(t, a)
	for range events.LogsPerContainer + 1 {
		if err := evil.PublishLog("other", "victim", "main", "stdout", 0, []byte("forged\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := flush(evil); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, a, 1+events.LogsPerContainer+1)
	for _, q := range []string{"", "&tail=1", "&tail=5"} {
		resp, body := get(t, a, "reader-token", "/v1/logs?namespace=other&pod=victim"+q)
		if resp.StatusCode != 200 || string(body) != "real output\n" {
			t.Fatalf("logs%s: %d, %d bytes beginning %q, want only the real output", q, resp.StatusCode, len(body), body[:min(len(body), 40)])
		}
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

// `logs --tail 100` of a container with 10,000 stored chunks reads from
// the end: it allocates a small fraction of the stored log, however long.
func TestLogsTailReadsFromTheEnd(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	logsPod(t, a, "good")
	good := openNode(t, a, "good")
	chunk := []byte(strings.Repeat(strings.Repeat("x", 99)+"\n", 20)) // 2,000 bytes, 20 lines
	for i := range events.LogsPerContainer {
		last := []byte(fmt.Sprintf("line %d\n", i))
		if err := good.PublishLog("other", "victim", "main", "stdout", 0, append(chunk[:len(chunk):len(chunk)], last...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := flush(good); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, a, events.LogsPerContainer)
	before := fingerprintOf(t, a)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	alloc := ms.TotalAlloc
	resp, body := get(t, a, "reader-token", "/v1/logs?namespace=other&pod=victim&tail=100")
	runtime.ReadMemStats(&ms)
	used := ms.TotalAlloc - alloc
	if resp.StatusCode != 200 {
		t.Fatalf("tail: %d %s", resp.StatusCode, body)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 100 || lines[99] != fmt.Sprintf("line %d", events.LogsPerContainer-1) {
		t.Fatalf("tail 100: %d lines ending %q", len(lines), lines[len(lines)-1])
	}
	t.Logf("tail 100 of %d chunks (%d MiB stored) allocated %.1f MiB", events.LogsPerContainer, events.LogsPerContainer*len(chunk)>>20, float64(used)/(1<<20))
	if used > 10<<20 {
		t.Fatalf("tail 100 allocated %d MiB, want under 10", used>>20)
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

func flush(n *events.NodeConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return n.Flush(ctx)
}

// Shutting down ends open watches at once instead of waiting for their
// clients to leave.
func TestShutdownEndsOpenWatches(t *testing.T) {
	a, stop := run(t, app.Config{Principals: principals()})
	t.Cleanup(stop)
	req, _ := http.NewRequest(http.MethodGet, a.URL()+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer reader-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	start := time.Now()
	stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown with an open watch took %s, want under 2 s", d.Round(time.Millisecond))
	}
}

// A client that sends its body too slowly, or keeps a connection idle,
// is cut off; a watch outlives both timeouts.
func TestAPIReadAndIdleTimeouts(t *testing.T) {
	lim := api.Limits{ReadTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	a := start(t, app.Config{Principals: principals(), APILimits: lim})
	addr := strings.TrimPrefix(a.URL(), "http://")
	closed := func(name string, conn net.Conn) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Fatalf("%s: the server did not close the connection: %v", name, err)
		}
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /v1/apply HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-token\r\nContent-Length: 1000\r\n\r\napiVersion: v1\n")
	closed("a slow body", slow)

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	closed("an idle connection", idle)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer reader-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	got := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		got <- err
	}()
	seed(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	select {
	case err := <-got:
		t.Fatalf("the watch ended within three read timeouts: %v", err)
	case <-time.After(3 * lim.ReadTimeout):
	}
}

// A bad Idempotency-Key is the client's error, named with its limit; no
// NATS internals leak, nothing is written.
func TestBadIdempotencyKeyIs400(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	seed(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	before := fingerprintOf(t, a)
	for _, key := range []string{strings.Repeat("k", 64<<10), "has space", "semi;colon", "ünïcode"} {
		req, _ := http.NewRequest(http.MethodPost, a.URL()+"/v1/apply", strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: idem, namespace: shop}\n"))
		req.Header.Set("Authorization", "Bearer admin-token")
		req.Header["Idempotency-Key"] = []string{key}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Idempotency-Key") || !strings.Contains(string(body), "128") || strings.Contains(strings.ToLower(string(body)), "nats") {
			t.Fatalf("key of %d bytes: %d %.200s", len(key), resp.StatusCode, body)
		}
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

// An apply larger than one atomic write is refused whole, with the limit.
func TestApplyOverOneAtomicWriteIsRefusedWhole(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	seed(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	before := fingerprintOf(t, a)
	var b strings.Builder
	for i := range events.MaxBatch + 1 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: shop}\n", i)
	}
	req, _ := http.NewRequest(http.MethodPost, a.URL()+"/v1/apply", strings.NewReader(b.String()))
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "at most 1000") {
		t.Fatalf("apply of %d objects: %d %.300s", events.MaxBatch+1, resp.StatusCode, body)
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

// The state at a time after the newest event is the latest state, with
// its real resourceVersion.
func TestStateAtALaterTimeIsTheLatest(t *testing.T) {
	dir := t.TempDir()
	a, stop := run(t, app.Config{Principals: principals(), DataDir: dir})
	seed(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	stop()
	// After a restart too: the log's blocks are read back from disk.
	a = start(t, app.Config{Principals: principals(), DataDir: dir})
	before := fingerprintOf(t, a)
	for _, at := range []string{time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano), time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		resp, body := get(t, a, "reader-token", "/v1/state?at="+url.QueryEscape(at))
		var l api.ListResponse
		if err := json.Unmarshal(body, &l); resp.StatusCode != 200 || err != nil {
			t.Fatalf("state at %s: %d %s", at, resp.StatusCode, body)
		}
		if l.ResourceVersion != before.LastSeq || len(l.Items) != 2 {
			t.Fatalf("state at %s: resourceVersion %d, %d items; want %d and 2", at, l.ResourceVersion, len(l.Items), before.LastSeq)
		}
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

// Eight histories at once of an object with 60 revisions of about 1 MiB
// each all answer, and the instance keeps its membership lease meanwhile:
// pages are bounded in bytes and the lease has a connection of its own.
func TestConcurrentHistoriesOfLargeObjects(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	seed(t, c)
	ctx := context.Background()
	big := strings.Repeat("x", 900<<10)
	const revisions = 60
	for i := range revisions {
		doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: shop}\ndata: {v: '%d%s'}\n", i, big)
		if _, err := c.Apply(ctx, "big.yaml", []byte(doc), ""); err != nil {
			t.Fatalf("revision %d: %v", i, err)
		}
	}
	before := fingerprintOf(t, a)
	pollUntil(t, "the lease held", func() bool { _, lost := a.Lease(); return lost != nil })
	until, lost := a.Lease()
	parts := a.Partitions()
	start := time.Now()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			// No deadline of its own: the test is of memory and the
			// lease, not of speed (the test binary's timeout bounds it).
			h, err := c.History(ctx, api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "big"})
			if err == nil && len(h.Events) < revisions {
				err = fmt.Errorf("%d events, want %d", len(h.Events), revisions)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("history: %v", err)
		}
	}
	t.Logf("eight histories of %d revisions took %s", revisions, time.Since(start).Round(time.Millisecond))
	select {
	case <-lost:
		t.Fatal("the instance lost its membership lease during the reads")
	default:
	}
	if now, _ := a.Lease(); !now.After(until) {
		t.Fatalf("the lease was not renewed during the reads: until %s, was %s", now, until)
	}
	if got := a.Partitions(); len(got) != len(parts) {
		t.Fatalf("partitions %v, were %v", got, parts)
	}
	unchanged(t, a, before)
	readsStillServe(t, a)
}

// The state at a past point comes in pages, every page of the same state.
func TestStateIsPaged(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	var docs []string
	for i := range 5 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: shop}\ndata: {v: '1'}\n", i))
	}
	if _, err := c.Apply(context.Background(), "x.yaml", []byte(strings.Join(docs, "---\n")), ""); err != nil {
		t.Fatal(err)
	}
	at := fingerprintOf(t, a).LastSeq
	// A change after the point does not show in later pages.
	if _, err := c.Apply(context.Background(), "x.yaml", []byte(strings.Replace(docs[4], "'1'", "'2'", 1)), ""); err != nil {
		t.Fatal(err)
	}
	var names []string
	pages := 0
	path := fmt.Sprintf("/v1/state?at=%d&limit=2", at)
	for {
		resp, body := get(t, a, "reader-token", path)
		var page api.ListResponse
		if err := json.Unmarshal(body, &page); resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if pages++; len(page.Items) > 2 || page.ResourceVersion != at {
			t.Fatalf("page of %d items at %d, want at most 2 at %d", len(page.Items), page.ResourceVersion, at)
		}
		for _, raw := range page.Items {
			o, err := api.DecodeObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			v := "1"
			if strings.Contains(string(raw), `"v":"2"`) {
				v = "2"
			}
			names = append(names, o.GetMetadata().GetName()+"="+v)
		}
		if page.Continue == "" {
			break
		}
		path = fmt.Sprintf("/v1/state?at=%d&limit=2&continue=%s", at, url.QueryEscape(page.Continue))
	}
	if want := "cm-0=1,cm-1=1,cm-2=1,cm-3=1,cm-4=1"; pages != 3 || strings.Join(names, ",") != want {
		t.Fatalf("%d pages of %q, want 3 pages of %s", pages, names, want)
	}
	all, err := c.StateAt(context.Background(), strconv.FormatUint(at, 10), api.Query{})
	if err != nil || len(all.Items) != 5 {
		t.Fatalf("client state: %d items, %v", len(all.Items), err)
	}
}

// A followed log is held open like a watch and counts against the same
// per-token limit.
func TestFollowedLogsCountAsWatches(t *testing.T) {
	a := start(t, app.Config{Principals: principals(), APILimits: api.Limits{Watches: 1}})
	logsPod(t, a, "good")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/v1/logs?namespace=other&pod=victim&follow=true", nil)
	req.Header.Set("Authorization", "Bearer reader-token")
	first, err := http.DefaultClient.Do(req)
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("follow: %v %v", first, err)
	}
	defer first.Body.Close()
	for _, path := range []string{"/v1/watch", "/v1/logs?namespace=other&pod=victim&follow=true"} {
		if code := statusOf(t, a, "reader-token", path); code != http.StatusTooManyRequests {
			t.Fatalf("%s beside a followed log: %d, want 429", path, code)
		}
	}
}

// statusOf is the status code of a GET, without reading the body (a
// stream's never ends).
func statusOf(t *testing.T, a *app.App, token, path string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// serving fails the test unless the API still answers reads.
func readsStillServe(t *testing.T, a *app.App) {
	t.Helper()
	for _, path := range []string{"/readyz", "/v1/objects?namespace=shop"} {
		if resp, body := get(t, a, "reader-token", path); resp.StatusCode != 200 {
			t.Fatalf("after the attack, %s: %d %.200s", path, resp.StatusCode, body)
		}
	}
}

// A controller credential's tokens share one budget: every token it signs
// is the same caller to the limiter, however many requests it makes.
func TestAPIRateLimitPerControllerCredential(t *testing.T) {
	a := start(t, app.Config{Principals: principals(), APILimits: api.Limits{Rate: 0.001, Burst: 2}})
	creds, err := a.Creds().CreateWithKinds(auth.RoleController, "widgets", []string{widgetKind})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		token, _, err := auth.SignToken(creds, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		resp, body := get(t, a, token, "/v1/objects")
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 2]; resp.StatusCode != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
}
