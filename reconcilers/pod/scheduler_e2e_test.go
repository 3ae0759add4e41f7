package pod_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// The scheduler and the node agents meet only at the Bound event: a burst
// of pods without a nodeName, applied at once, is placed by the scheduler
// over two nodes, and each pod runs on the node it was bound to, reported
// by that node's agent alone, with the decision recorded on its Bound event.
func TestABurstOfUnboundPodsLandsOnNodesAndRuns(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.startAgent("n2")
	c.wait(projections.Key{Kind: "Node", Name: "n1"}, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })

	const burst = 20
	var docs []string
	for i := range burst {
		docs = append(docs, strings.Replace(podYAML(fmt.Sprintf("burst-%d", i), "", "Never", "workload:v1", "hello"), "  nodeName: \n", "", 1))
	}
	c.apply(strings.Join(docs, "---\n")) // one apply: the whole burst at once

	ran := map[string]int{}
	for i := range burst {
		k := podKey("default", fmt.Sprintf("burst-%d", i))
		o := c.waitPhase(k, "Completed")
		node := o.GetSpec().GetFields()["nodeName"].GetStringValue()
		if node != "n1" && node != "n2" {
			t.Fatalf("%s bound to %q", k, node)
		}
		ran[node]++
		for _, ev := range c.statusEvents(k) {
			if ev.Actor != "node/"+node {
				t.Fatalf("%s bound to %s got a report from %s", k, node, ev.Actor)
			}
		}
		all, err := c.app.Log().History(context.Background(), k.Proto())
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, ev := range all {
			if ev.Type == schemas.EventType_EVENT_TYPE_BOUND {
				bound++
				if ev.GetDetail() == nil {
					t.Fatalf("%s: Bound event without the scheduling decision", k)
				}
			}
		}
		if bound != 1 {
			t.Fatalf("%s has %d Bound events, want exactly one", k, bound)
		}
	}
	if ran["n1"] == 0 || ran["n2"] == 0 {
		t.Fatalf("the burst ran %v: one node got nothing", ran)
	}
}

// serve's --scheduler-config gives the scheduler its profiles: a pod that
// names the config's second profile is placed by it, and its Bound event
// records that profile.
func TestTheSchedulerConfigFileSelectsTheProfile(t *testing.T) {
	c := startCluster(t, func(cfg *app.Config) { cfg.Pods.SchedulerConfig = "../../scheduler/testdata/most.yaml" })
	c.push("workload:v1", workload(t))
	c.wait(projections.Key{Kind: "Node", Name: "n1"}, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
	doc := strings.Replace(podYAML("packed", "", "Never", "workload:v1", "hello"), "  nodeName: \n", "  schedulerName: binpack\n", 1)
	c.apply(doc)
	k := podKey("default", "packed")
	c.waitPhase(k, "Completed")
	all, err := c.app.Log().History(context.Background(), k.Proto())
	if err != nil {
		t.Fatal(err)
	}
	var profile string
	for _, ev := range all {
		if ev.Type == schemas.EventType_EVENT_TYPE_BOUND {
			profile = ev.GetDetail().GetFields()["profile"].GetStringValue()
		}
	}
	if profile != "binpack" {
		t.Fatalf("the pod was bound by profile %q, want binpack (from --scheduler-config)", profile)
	}
}

// A config file that does not parse stops serve at start, naming the flag.
func TestABadSchedulerConfigStopsServe(t *testing.T) {
	bad := t.TempDir() + "/sched.yaml"
	if err := os.WriteFile(bad, []byte("profiles:\n- schedulerNam: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := app.New(t.Context(), app.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", NATSPort: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Pods: app.PodsConfig{SchedulerConfig: bad}})
	if err == nil || !strings.Contains(err.Error(), "--scheduler-config") || !strings.Contains(err.Error(), "schedulerNam") {
		t.Fatalf("app.New with a bad scheduler config: %v, want an error naming --scheduler-config and the field", err)
	}
}

// The image store is readable through the API (what `explain --replay`
// loads a WebAssembly plugin named by image with): a ref resolves to the
// digest the store holds, the module comes back byte for byte, and a
// missing one says how to fix it.
func TestImagesAreReadableThroughTheAPI(t *testing.T) {
	c := startCluster(t, nil)
	mod := workload(t)
	im := c.push("workload:v1", mod)
	src := api.ImageSource{Client: c.client}
	ctx := context.Background()
	digest, size, err := src.Resolve(ctx, "workload:v1")
	if err != nil {
		t.Fatal(err)
	}
	if digest != im.Digest || size != uint64(len(mod)) {
		t.Fatalf("resolved %s (%d bytes), want %s (%d bytes)", digest, size, im.Digest, len(mod))
	}
	var got bytes.Buffer
	if err := src.Fetch(ctx, digest, &got, int64(len(mod))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), mod) {
		t.Fatalf("fetched %d bytes, not the module pushed (%d bytes)", got.Len(), len(mod))
	}
	if err := src.Fetch(ctx, digest, io.Discard, int64(len(mod))-1); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("fetch past the limit: %v", err)
	}
	if _, _, err := src.Resolve(ctx, "nope:v1"); err == nil || !strings.Contains(err.Error(), "push it with jetplane image push") {
		t.Fatalf("resolve of a missing image: %v", err)
	}
}
