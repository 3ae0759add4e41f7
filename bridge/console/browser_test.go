package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// chromium finds a Chromium to drive. Under CI=true a missing browser is a
// failure (./scripts/test installs Debian's chromium package); elsewhere
// the test skips and says how to get one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("JETPLANE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found: ./scripts/test installs Debian's chromium package; or set JETPLANE_CHROMIUM")
	}
	t.Skip("needs Chromium: install Debian's chromium package (./scripts/test does), or set JETPLANE_CHROMIUM")
	return ""
}

// artifacts is where screenshots are kept: $JETPLANE_TEST_ARTIFACTS, or
// .artifacts/ at the repository root.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("JETPLANE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startServer(t *testing.T, tokens map[string]string, principals ...api.Principal) string {
	t.Helper()
	a, _ := apptest.Start(t, app.Config{Tokens: tokens, Principals: principals, Reconcilers: []reconcilers.Reconciler{widgets{}}}, 60*time.Second)
	return a.URL()
}

// widgets reconciles Widget.example.com objects by declaring them Ready,
// so the server runs reconcilers and holds partitions.
type widgets struct{}

func (widgets) Kinds() []string { return []string{"Widget.example.com"} }
func (widgets) Reconcile(context.Context, *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{Phase: "Ready", Message: "widget in place"}, nil
}
func (widgets) Finalize(context.Context, *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{}, nil
}

func configMap(v string) []byte {
	return []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop, labels: {app: web}, dependsOn: [{kind: ConfigMap, name: base}]}\ndata: {v: '%s'}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: base, namespace: shop}\n", v))
}

// bigConfigMap has enough keys that its first event's diff is folded.
func bigConfigMap() []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: shop}\ndata:\n")
	for i := range 60 {
		fmt.Fprintf(&b, "  key%02d: value %d\n", i, i)
	}
	return []byte(b.String())
}

// pendingPod waits for a scheduler nobody runs: Pending for good.
var pendingPod = []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: waiting, namespace: shop}\nspec: {schedulerName: elsewhere, containers: [{name: c, image: hello:v1}]}\n")

// TestConsoleInBrowser loads the console in headless Chromium against a
// real server with authentication: it asks for a token in its own words,
// shows an object applied through the API as it appears (live, through
// the watch API) with its age and message, opens its history (YAML diffs
// of the changed fields, long ones folded, the whole state behind a
// toggle), and moves the time slider back to see the earlier state and
// which event that was. A token confined to namespaces gets them to pick
// from. Screenshots of each step are kept (see artifacts).
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	const token, confined = "s3cret", "c0nfined"
	url := startServer(t, map[string]string{token: "alice"},
		api.Principal{Token: confined, Name: "carol", Role: api.RoleReader, Namespaces: []string{"shop", "web"}})
	c := &api.Client{BaseURL: url, Token: token}
	shots := artifacts(t)

	// The page itself needs no token; the data does.
	for path, want := range map[string]int{"/": 200, "/console/app.js": 200, "/v1/objects": 401} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a token: %d, want %d", path, resp.StatusCode, want)
		}
	}

	ctx := t.Context()
	bctx := browser(t, exe)
	shot := func(name string) chromedp.Action { return shotTo(shots, name) }
	poll := func(what, js string) chromedp.Action { return pollFor(what, js, 30*time.Second, 50*time.Millisecond) }
	row := `tr[data-key="ConfigMap/shop/web"]`

	// Without a token the console says what it needs, in its own words (no
	// command-line flags) and without "No objects."; with it, it lists.
	var noToken string
	if err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/"),
		poll("the token banner", `!document.getElementById("banner").hidden && document.getElementById("banner").innerText.includes("token")`),
		poll("the objects page saying it needs a token", `document.getElementById("live").innerText === "needs a token" && document.getElementById("objects-table").hidden`),
		chromedp.Evaluate(`document.body.innerText`, &noToken),
		shot("01-token-needed.png"),
	); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(noToken, "--token") || strings.Contains(noToken, "No objects.") {
		t.Errorf("without a token the console shows:\n%s", noToken)
	}
	if err := chromedp.Run(bctx,
		chromedp.SendKeys("#token", token, chromedp.ByID),
		chromedp.Click("#token-form button", chromedp.ByQuery),
		poll("the live objects table", `document.getElementById("live") && document.getElementById("live").innerText.startsWith("live")`),
	); err != nil {
		t.Fatal(err)
	}

	// An object applied through the API appears without a reload.
	first, err := c.Apply(ctx, "test", configMap("1"), "")
	if err != nil {
		t.Fatal(err)
	}
	firstSeq := 0
	for _, r := range first.Results {
		o, err := api.DecodeObject(r.Object)
		if err != nil {
			t.Fatal(err)
		}
		firstSeq = max(firstSeq, int(o.GetMetadata().GetResourceVersion()))
	}
	for _, m := range [][]byte{pendingPod, bigConfigMap()} {
		if _, err := c.Apply(ctx, "test", m, ""); err != nil {
			t.Fatal(err)
		}
	}
	pod := `tr[data-key="Pod/shop/waiting"]`
	if err := chromedp.Run(bctx,
		poll("the applied object appearing live", `!!document.querySelector('`+row+`')`),
		poll("AGE and MESSAGE columns", `[...document.querySelectorAll("#objects-table th")].map((th) => th.innerText).join(" ").includes("AGE MESSAGE")`),
		poll("the pending pod with its message", `!!document.querySelector('`+pod+`') && document.querySelector('`+pod+` td.message').innerText.includes("waiting for scheduler")`),
		shot("02-object-appeared.png"),
	); err != nil {
		t.Fatal(err)
	}
	var podReady, podAge string
	if err := chromedp.Run(bctx, chromedp.Text(pod+` td.ready`, &podReady, chromedp.ByQuery), chromedp.Text(pod+` td.age`, &podAge, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if podReady == "True" || !strings.HasSuffix(podAge, "s") {
		t.Errorf("a Pending pod shows READY %q, AGE %q", podReady, podAge)
	}
	if _, err := c.Apply(ctx, "test", configMap("2"), ""); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(bctx,
		poll("the change arriving live", `document.querySelector('`+row+` td.gen').innerText === "2"`),
		// Its page: history as a timeline with a diff per event, and the
		// dependsOn graph.
		chromedp.Click(row+` a.obj-link`, chromedp.ByQuery),
		poll("the history timeline", `document.querySelectorAll("#timeline li.event").length === 2`),
		poll("the YAML diff of the second event", `/\+\s+v: "2"/.test(document.querySelectorAll("#timeline li.event")[1].innerText) && /-\s+v: "1"/.test(document.querySelectorAll("#timeline li.event")[1].innerText)`),
		poll("the second event's changed field only", `document.querySelectorAll("#timeline li.event")[1].querySelector(".ev-changed").innerText === "changed: spec.data.v"`),
		poll("the whole state behind a toggle", `document.querySelectorAll("#timeline details.ev-state").length === 2 && !document.querySelector("#timeline details.ev-state").open`),
		poll("the spec in YAML", `/^data:\n  v: "2"/.test(document.getElementById("spec").innerText)`),
		poll("the dependsOn graph", `document.querySelector("#graph").textContent.includes("ConfigMap/shop/base")`),
		poll("visible dependency arrows", `[...document.querySelectorAll("#graph line.edge")].every((l) => l.getAttribute("stroke-width") >= 2 && l.getAttribute("stroke") === "#2456c7")`),
		shot("03-object-history.png"),
		// A long diff is folded.
		chromedp.Navigate(url+"/#/object?kind=ConfigMap&namespace=shop&name=big"),
		poll("the folded diff", `!!document.querySelector("#timeline details.fold") && !document.querySelector("#timeline details.fold").open && document.querySelector("#timeline details.fold summary").innerText.endsWith("more lines")`),
		shot("03b-long-diff-folded.png"),
	); err != nil {
		t.Fatal(err)
	}

	// Time travel: the slider back to the first apply shows generation 1.
	var label string
	if err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/#/state?namespace=shop"),
		poll("the state page at the head", `!!document.querySelector('#state `+row+`') && document.querySelector('#state `+row+` td.gen').innerText === "2"`),
		shot("04-state-now.png"),
		chromedp.Evaluate(fmt.Sprintf(`(() => { const s = document.getElementById("slider"); s.value = %d; s.dispatchEvent(new Event("input")); })()`, firstSeq), nil),
		poll("the earlier state", `document.querySelector('#state `+row+` td.gen').innerText === "1"`),
		poll("which event that sequence is", fmt.Sprintf(`/^Event #%d: Applied of ConfigMap\/shop\/(web|base) by user\/alice at /.test(document.getElementById("at-event").innerText)`, firstSeq)),
		chromedp.Text("#at-label", &label, chromedp.ByID),
		shot("05-state-earlier.png"),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(label, fmt.Sprintf("#%d of", firstSeq)) {
		t.Errorf("slider label %q, want #%d of ...", label, firstSeq)
	}

	// A deleted object keeps its page: history only, with the finalization
	// linked to the delete request that caused it.
	if _, err := c.Delete(ctx, api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/#/object?kind=ConfigMap&namespace=shop&name=web"),
		poll("the cause link", `[...document.querySelectorAll("#timeline a")].some((a) => /^caused by #\d+$/.test(a.innerText))`),
		shot("06-deleted-history.png"),
		// The partitions page lists this instance's partitions; the clusters
		// page says there are none.
		chromedp.Navigate(url+"/#/partitions"),
		poll("the partitions page", `document.getElementById("main").innerText.includes("16 partitions") && document.querySelectorAll("#partitions tbody tr").length === 1`),
		poll("no stray null", `!document.getElementById("main").innerText.includes("null")`),
		shot("07-partitions.png"),
		chromedp.Navigate(url+"/#/clusters"),
		poll("the clusters page", `document.getElementById("main").innerText.includes("watches no Kubernetes cluster")`),
	); err != nil {
		t.Fatal(err)
	}

	// A token confined to namespaces picks one instead of reading an error.
	if err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/#/"),
		chromedp.SetValue("#token", confined, chromedp.ByID),
		chromedp.Click("#token-form button", chromedp.ByQuery),
		poll("the namespace picker", `!!document.querySelector('#ns-picker button[data-ns="shop"]') && !!document.querySelector('#ns-picker button[data-ns="web"]') && document.getElementById("ns-picker").innerText.includes("This token sees only namespaces shop, web")`),
		shot("08-namespace-picker.png"),
		chromedp.Click(`#ns-picker button[data-ns="shop"]`, chromedp.ByQuery),
		poll("shop's objects", `location.hash.includes("namespace=shop") && !!document.querySelector('`+pod+`') && !document.getElementById("ns-picker")`),
		shot("09-namespace-picked.png"),
	); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
}

// browser starts headless Chromium (exe) for one test and returns its
// context, which ends with the test, after 3 minutes at most.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	})
	return bctx
}

// shotTo saves a screenshot of the whole page as dir/name.
func shotTo(dir, name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var png []byte
		if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), png, 0o644)
	})
}

// pollFor waits up to d, checking every interval, for js to hold on the
// page; when it does not, the error names what and shows the page's text.
func pollFor(what, js string, d, every time.Duration) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if err := chromedp.Poll(js, nil, chromedp.WithPollingInterval(every)).Do(pctx); err != nil {
			var body string
			_ = chromedp.Evaluate(`document.getElementById("main").innerText + "\n" + (document.getElementById("banner")?.innerText ?? "")`, &body).Do(ctx)
			return fmt.Errorf("%s: %w; the page shows:\n%s", what, err, body)
		}
		return nil
	})
}
