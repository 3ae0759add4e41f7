package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/reconcilers/pod"
)

const workloadManifests = `apiVersion: batch/v1
kind: Job
metadata: {name: greet, namespace: shop}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: hello, image: hello:v1, args: ["-n", "3"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      nodeSelector: {zone: nowhere}
      containers:
      - {name: hello, image: hello:v1}
`

// TestConsoleShowsAWorkloadsPodsAndAPodsLogs runs a node agent and, in
// headless Chromium, opens a Job's page (its pod listed), that pod's page
// (its output), and a Deployment whose pod cannot be scheduled (listed,
// Pending, not Ready).
func TestConsoleShowsAWorkloadsPodsAndAPodsLogs(t *testing.T) {
	exe := chromium(t)
	bin := apptest.WASM(t, t.TempDir(), "../../deploy/examples/wasm/hello")
	ctx := t.Context()
	a, _ := apptest.Start(t, app.Config{Tokens: map[string]string{"s3cret": "alice"},
		Pods: app.PodsConfig{Agent: pod.AgentConfig{Node: "n1", Heartbeat: 200 * time.Millisecond}},
	}, 60*time.Second)
	if _, err := a.Images().Push(ctx, "hello:v1", strings.NewReader(string(bin)), 0); err != nil {
		t.Fatal(err)
	}
	c := &api.Client{BaseURL: a.URL(), Token: "s3cret"}
	if _, err := c.Apply(ctx, "test", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n"+workloadManifests), ""); err != nil {
		t.Fatal(err)
	}

	shots := artifacts(t)
	bctx := browser(t, exe)
	shot := func(name string) chromedp.Action { return shotTo(shots, name) }
	poll := func(what, js string) chromedp.Action { return pollFor(what, js, 60*time.Second, 100*time.Millisecond) }
	// Pages load once: reload until what the server has shows.
	reloadUntil := func(what, url, js string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			end := time.Now().Add(60 * time.Second)
			for first := true; ; first = false {
				nav := chromedp.Navigate(url)
				if !first {
					nav = chromedp.Reload() // the same hash again would not load the page
				}
				if err := nav.Do(ctx); err != nil {
					return err
				}
				var ok bool
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := chromedp.Poll(js, &ok, chromedp.WithPollingInterval(100*time.Millisecond)).Do(pctx)
				cancel()
				if err == nil {
					return nil
				}
				if time.Now().After(end) {
					var body string
					_ = chromedp.Evaluate(`document.getElementById("main").innerText`, &body).Do(ctx)
					return fmt.Errorf("%s: not after 60s; the page shows:\n%s", what, body)
				}
			}
		})
	}
	var podHref string
	if err := chromedp.Run(bctx,
		chromedp.Navigate(a.URL()+"/"),
		chromedp.SendKeys("#token", "s3cret", chromedp.ByID),
		chromedp.Click("#token-form button", chromedp.ByQuery),
		poll("the live objects table", `document.getElementById("live").innerText.startsWith("live")`),
		reloadUntil("the Job's pod, Succeeded", a.URL()+"/#/object?kind=Job.batch&namespace=shop&name=greet",
			`!!document.querySelector('#pods-table tr[data-key^="Pod/shop/greet-"]') && document.querySelector('#pods-table tr[data-key^="Pod/shop/greet-"]').innerText.includes("Succeeded")`),
		shot("10-job-pods.png"),
		chromedp.AttributeValue(`#pods-table tr[data-key^="Pod/shop/greet-"] a.obj-link`, "href", &podHref, nil, chromedp.ByQuery),
		chromedp.Click(`#pods-table tr[data-key^="Pod/shop/greet-"] a.obj-link`, chromedp.ByQuery),
		poll("the pod's logs", `!!document.getElementById("logs") && document.getElementById("logs").innerText.startsWith("hello, world (1/3)\nhello, world (2/3)\nhello, world (3/3)")`),
		shot("11-pod-logs.png"),
		reloadUntil("the Deployment's pending pod", a.URL()+"/#/object?kind=Deployment.apps&namespace=shop&name=stuck",
			`!!document.querySelector('#pods-table tr[data-key^="Pod/shop/stuck-"]')`),
		poll("the pending pod not Ready", `document.querySelector('#pods-table tr[data-key^="Pod/shop/stuck-"] td.ready').innerText !== "True" && document.querySelector('#pods-table tr[data-key^="Pod/shop/stuck-"]').innerText.includes("Pending")`),
		shot("12-deployment-pending-pod.png"),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(podHref, "kind=Pod") {
		t.Errorf("the pod's link %q", podHref)
	}
}
