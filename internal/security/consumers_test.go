package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// consumersNamed counts the log's consumers whose names start with prefix.
func consumersNamed(t *testing.T, a *app.App, prefix string) int {
	t.Helper()
	js, err := jetstream.New(a.Log().Conn())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	names := s.ConsumerNames(context.Background())
	for name := range names.Name() {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// pollUntil waits until cond holds.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One subscriber creating consumers as fast as it can breaks nobody
// else's reads: it keeps at most its limit, history and state at a past
// sequence keep answering for everyone, another subscriber still reads,
// a consumer of another subscriber cannot be changed under it, and
// revoking the credential removes what it made, across a restart.
func TestSubscriberConsumerExhaustion(t *testing.T) {
	dir := t.TempDir()
	a, stop := run(t, app.Config{Principals: principals(), DataDir: dir})
	t.Cleanup(stop)
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	seed(t, c)
	before := fingerprintOf(t, a)
	ctx := context.Background()

	// Another subscriber's consumer, made first.
	onc, _ := connectAs(t, a, auth.RoleSubscriber, "audit")
	ojs, _ := jetstream.New(onc, jetstream.WithDefaultTimeout(5*time.Second))
	if _, err := ojs.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Durable: "audit-feed", FilterSubject: "jp.ev.>", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}

	nc, _ := connectAs(t, a, auth.RoleSubscriber, "greedy")
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for i := range 1200 {
		if _, err := js.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Durable: fmt.Sprintf("greedy-%d", i), AckPolicy: jetstream.AckNonePolicy}); err == nil {
			made++
		}
	}
	t.Logf("the server answered %d of 1,200 creates", made)

	pollUntil(t, "the greedy subscriber within its limit", func() bool { return consumersNamed(t, a, "greedy-") <= auth.DefaultMaxConsumers })

	check := func(when string) {
		t.Helper()
		if _, err := c.History(ctx, api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}); err != nil {
			t.Fatalf("%s: history: %v", when, err)
		}
		if _, err := c.StateAt(ctx, "1", api.Query{}); err != nil {
			t.Fatalf("%s: state at 1: %v", when, err)
		}
		if d, err := c.Describe(ctx, api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}); err != nil || len(d.Events) == 0 {
			t.Fatalf("%s: describe: %v", when, err)
		}
	}
	check("after the flood")
	if _, err := ojs.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Durable: "audit-second", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatalf("another subscriber cannot make a consumer: %v", err)
	}

	// The greedy one takes over audit's consumer with its own filter:
	// the consumer does not stay changed.
	if _, err := js.CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Durable: "audit-feed", FilterSubject: "jp.ev.0.>", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Logf("update of another's consumer refused: %v", err)
	}
	pollUntil(t, "audit's consumer not left with greedy's filter", func() bool {
		ci, err := a.Log().Conn().Request("$JS.API.CONSUMER.INFO."+events.StreamName+".audit-feed", nil, 5*time.Second)
		return err == nil && !strings.Contains(string(ci.Data), `"jp.ev.0.\u003e"`) && !strings.Contains(string(ci.Data), `"jp.ev.0.>"`)
	})

	if err := a.Creds().Revoke("greedy"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the revoked subscriber's consumers gone", func() bool { return consumersNamed(t, a, "greedy-") == 0 })
	unchanged(t, a, before)

	stop()
	a = start(t, app.Config{Principals: principals(), DataDir: dir})
	c.BaseURL = a.URL()
	check("after a restart")
	unchanged(t, a, before)
	serving(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
}
