package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/controller"
	"github.com/jetplane/jetplane/schemas"
)

const wait = 30 * time.Second

// startApp runs jetplane with the embedded NATS on a free port, with a
// controller credential for kinds made before it starts (the server loads
// it at its start), and returns it and the credential's file.
func startApp(t *testing.T, name string, kinds ...string) (*app.App, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := auth.Open(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := store.CreateWithKinds(auth.RoleController, name, kinds)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(creds, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, app.Config{DataDir: dir, NATSPort: -1, Listen: "127.0.0.1:0"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(wait)
	for {
		if resp, err := http.Get(a.URL() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, creds
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("jetplane not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tracker is a controller of two kinds that records its runs, fails each
// key's first run, and checks that no key runs twice at once.
type tracker struct {
	mu      sync.Mutex
	running map[string]bool
	runs    map[string]int
	order   []string // "reconcile K" or "delete K" on success
	overlap []string
}

func (*tracker) Kinds() []string { return []string{"Net.example.com", "Host.example.com"} }

func (tr *tracker) enter(obj *schemas.Object) (string, func()) {
	k := projections.ObjectKey(obj).String()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.running[k] {
		tr.overlap = append(tr.overlap, k)
	}
	tr.running[k] = true
	tr.runs[k]++
	return k, func() { tr.mu.Lock(); tr.running[k] = false; tr.mu.Unlock() }
}

func (tr *tracker) Reconcile(ctx context.Context, obj *schemas.Object) (controller.Status, time.Duration, error) {
	k, done := tr.enter(obj)
	defer done()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.runs[k] == 1 {
		return controller.Status{}, 0, errors.New("the cloud said no, once")
	}
	tr.order = append(tr.order, "reconcile "+k)
	return controller.Status{Message: "made", Fields: map[string]any{"id": k}}, time.Hour, nil
}

func (tr *tracker) Delete(ctx context.Context, obj *schemas.Object) error {
	k, done := tr.enter(obj)
	defer done()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.order = append(tr.order, "delete "+k)
	return nil
}

// A controller in its own process (here, its own connection and
// projection) reconciles its kinds in dependency order through its
// credential, retries errors, and deletes in reverse order.
func TestControllerRunsItsKinds(t *testing.T) {
	a, creds := startApp(t, "infra", "Net.example.com", "Host.example.com")
	tr := &tracker{running: map[string]bool{}, runs: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			done <- controller.Run(ctx, controller.Config{NATS: a.NATSURL(), Creds: creds, Instance: []string{"a", "b"}[i], Grace: time.Second}, tr)
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		}
	})
	c := &api.Client{BaseURL: a.URL()}
	doc := `apiVersion: example.com/v1
kind: Net
metadata: {name: n1, namespace: infra}
spec: {cidr: 10.0.0.0/16}
---
apiVersion: example.com/v1
kind: Host
metadata: {name: h1, namespace: infra, dependsOn: [{kind: Net, name: n1}]}
spec: {size: small}
`
	if _, err := c.Apply(ctx, "infra.yaml", []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	net := projections.Key{Kind: "Net.example.com", Namespace: "infra", Name: "n1"}
	host := projections.Key{Kind: "Host.example.com", Namespace: "infra", Name: "h1"}
	waitFor(t, "both Ready", func() bool {
		return reconcilers.IsReady(a.Store().Get(net)) && reconcilers.IsReady(a.Store().Get(host))
	})
	if got := a.Store().Get(host).GetStatus().GetDetails().GetFields()["id"].GetStringValue(); got != host.String() {
		t.Fatalf("status details: %q", got)
	}
	if _, err := c.Delete(ctx, api.Key{Kind: "Net.example.com", Namespace: "infra", Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, api.Key{Kind: "Host.example.com", Namespace: "infra", Name: "h1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both gone", func() bool { return a.Store().Get(net) == nil && a.Store().Get(host) == nil })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	// Runs are level-triggered: a key may run again (its take-over and
	// its creation's delivery can both wake it), so the order is read
	// by each key's first reconcile and its one clean-up.
	want := []string{"reconcile " + net.String(), "reconcile " + host.String(), "delete " + host.String(), "delete " + net.String()}
	var got []string
	for _, step := range tr.order {
		if !slices.Contains(got, step) {
			got = append(got, step)
		} else if strings.HasPrefix(step, "delete ") {
			t.Fatalf("order %q: %s cleaned up twice", tr.order, step)
		} else if slices.Contains(got, "delete "+strings.TrimPrefix(step, "reconcile ")) {
			t.Fatalf("order %q: %s after its clean-up", tr.order, step)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want first runs in the order %q", tr.order, want)
	}
	if len(tr.overlap) > 0 {
		t.Fatalf("keys ran twice at once: %q", tr.overlap)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The instances' partition consumers read only the kinds jetplane runs
// in-process: the events of a controller's kinds (created, then their
// statuses) are handed to the controller's consumers and to no instance
// consumer, which would only acknowledge them.
func TestInstancesAreNotHandedAControllersKinds(t *testing.T) {
	a, creds := startApp(t, "nets", "Net.example.com")
	ctx, cancel := context.WithCancel(context.Background())
	runNetsOnly(t, ctx, cancel, a.NATSURL(), creds)
	js := instanceJetStream(t, a)
	// Every event an instance consumer matches was delivered or is
	// pending: their sum grows by each matching event, whenever it is
	// delivered.
	matched := func() uint64 {
		var n uint64
		for p := range a.Log().Partitions() {
			c, err := js.Consumer(ctx, events.StreamName, events.PartitionConsumer("", p))
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue // no event of its partition was read yet
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += info.Delivered.Consumer + info.NumPending
		}
		return n
	}
	before := matched()
	const n = 20
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, "apiVersion: example.com/v1\nkind: Net\nmetadata: {name: n%d, namespace: infra}\nspec: {cidr: 10.%d.0.0/16}\n---\n", i, i)
	}
	c := &api.Client{BaseURL: a.URL()}
	if _, err := c.Apply(ctx, "nets.yaml", []byte(doc.String()), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every Net Ready", func() bool {
		for i := range n {
			if !reconcilers.IsReady(a.Store().Get(projections.Key{Kind: "Net.example.com", Namespace: "infra", Name: fmt.Sprintf("n%d", i)})) {
				return false
			}
		}
		return true
	})
	if got := matched() - before; got != 0 {
		t.Fatalf("the instances' partition consumers matched %d events of the controller's kind", got)
	}
}

// netsOnly makes every Net Ready.
type netsOnly struct{}

func (netsOnly) Kinds() []string { return []string{"Net.example.com"} }

func (netsOnly) Reconcile(context.Context, *schemas.Object) (controller.Status, time.Duration, error) {
	return controller.Status{Message: "made"}, 0, nil
}

func (netsOnly) Delete(context.Context, *schemas.Object) error { return nil }

// A controller's partition consumers acknowledge runs of deliveries, as
// the instances' do (decision 0108): they are made with the all-below
// policy under names of their own, which hold the credential's consumer
// tag (decision 0122), and the consumers earlier versions read with (one
// acknowledgement each, or names without the tag) are deleted when it
// reads.
func TestControllerConsumersAcknowledgeRuns(t *testing.T) {
	a, creds := startApp(t, "nets", "Net.example.com")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := instanceJetStream(t, a)
	prefix, err := events.CredsConsumerPrefix(creds)
	if err != nil || !strings.HasPrefix(prefix, events.ControllerConsumerPrefix+"nets_") {
		t.Fatalf("consumer prefix %q, %v", prefix, err)
	}
	earlier := []string{
		events.ExplicitAckPartitionConsumer(events.ControllerConsumerPrefix+"nets", 0),
		events.PartitionConsumer(events.ControllerConsumerPrefix+"nets", 1),
	}
	for _, old := range earlier {
		if _, err := js.CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{
			Durable: old, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: events.KindPartitionFilter(0, "Net.example.com"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	runNetsOnly(t, ctx, cancel, a.NATSURL(), creds)
	c := &api.Client{BaseURL: a.URL()}
	const n = 20
	applyNets := func(from, to int) {
		t.Helper()
		var doc strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&doc, "apiVersion: example.com/v1\nkind: Net\nmetadata: {name: n%d, namespace: infra}\nspec: {cidr: 10.%d.0.0/16}\n---\n", i, i)
		}
		if _, err := c.Apply(ctx, "nets.yaml", []byte(doc.String()), ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every Net Ready", func() bool {
			for i := from; i < to; i++ {
				if !reconcilers.IsReady(a.Store().Get(projections.Key{Kind: "Net.example.com", Namespace: "infra", Name: fmt.Sprintf("n%d", i)})) {
					return false
				}
			}
			return true
		})
	}
	// consumers reads the controller's partition consumers: how many
	// exist, how many deliveries they made, and whether any is pending.
	consumers := func() (found, delivered int, pending bool) {
		for p := range a.Log().Partitions() {
			cons, err := js.Consumer(ctx, events.StreamName, events.PartitionConsumer(prefix, p))
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Config.AckPolicy != jetstream.AckAllPolicy {
				t.Fatalf("%s acknowledges %v, want all", info.Name, info.Config.AckPolicy)
			}
			found++
			delivered += int(info.Delivered.Consumer)
			pending = pending || info.NumAckPending > 0 || info.NumPending > 0
		}
		return found, delivered, pending
	}
	// The first Nets may be applied before the controller holds its
	// partitions: its take-over runs them, and its consumers start after
	// (decision 0109). Once every partition's consumer is there, the next
	// Nets are each delivered twice, their creation and their status.
	applyNets(0, n)
	waitFor(t, "every partition consumer created", func() bool {
		found, _, _ := consumers()
		return found == a.Log().Partitions()
	})
	for _, old := range earlier {
		if _, err := js.Consumer(ctx, events.StreamName, old); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("the earlier consumer %s: %v, want it deleted", old, err)
		}
	}
	_, before, _ := consumers()
	applyNets(n, 2*n)
	// Every delivery is acknowledged: nothing stays pending once the
	// runs are done, and the policy is all-below.
	waitFor(t, "every delivery acknowledged", func() bool {
		_, delivered, pending := consumers()
		return !pending && delivered-before >= 2*n
	})
}

// instanceJetStream is JetStream over a connection with a's instance
// credential, closed when the test ends.
func instanceJetStream(t *testing.T, a *app.App) jetstream.JetStream {
	t.Helper()
	opts, err := events.CredsOptions(a.Creds().InstanceCreds())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(a.NATSURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// runNetsOnly runs the netsOnly controller until the test ends, when it
// cancels ctx and checks the controller stopped cleanly.
func runNetsOnly(t *testing.T, ctx context.Context, cancel context.CancelFunc, url, creds string) {
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, controller.Config{NATS: url, Creds: creds, Grace: time.Second}, netsOnly{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
}

// A controller whose credential file is from before consumer tags (no
// consumer-prefix line) keeps running, on the untagged names its
// credential still acknowledges on (decision 0122).
func TestControllerWithACredentialFromBeforeTags(t *testing.T) {
	a, creds := startApp(t, "nets", "Net.example.com")
	data, err := os.ReadFile(creds)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, events.ConsumerPrefixComment) {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(creds, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runNetsOnly(t, ctx, cancel, a.NATSURL(), creds)
	c := &api.Client{BaseURL: a.URL()}
	if _, err := c.Apply(ctx, "net.yaml", []byte("apiVersion: example.com/v1\nkind: Net\nmetadata: {name: n0, namespace: infra}\nspec: {cidr: 10.0.0.0/16}\n"), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Net Ready", func() bool {
		return reconcilers.IsReady(a.Store().Get(projections.Key{Kind: "Net.example.com", Namespace: "infra", Name: "n0"}))
	})
	js := instanceJetStream(t, a)
	waitFor(t, "its untagged consumers", func() bool {
		for p := range a.Log().Partitions() {
			if _, err := js.Consumer(ctx, events.StreamName, events.PartitionConsumer(events.ControllerConsumers("nets", ""), p)); err != nil {
				return false
			}
		}
		return true
	})
}
