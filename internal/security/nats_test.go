package security

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// Nothing connects to the embedded NATS without a credential: the attack
// of the issue (an unauthenticated client deleting the log) cannot start.
func TestNATSRefusesClientsWithoutCredentials(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	before := fingerprintOf(t, a)
	nc, err := nats.Connect(a.NATSURL(), nats.Timeout(2*time.Second))
	if err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("refusal is not an authorization error: %v", err)
	}
	unchanged(t, a, before)
}

// A subscriber reads the log but can write, delete or change nothing.
func TestSubscriberCannotWrite(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	before := fingerprintOf(t, a)
	nc, v := connectAs(t, a, auth.RoleSubscriber, "audit")
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// It can read: an ordered consumer on the log sees every event.
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatalf("subscriber cannot look up the log: %v", err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("subscriber cannot read the log: %v", err)
	}
	for i := uint64(1); i <= before.LastSeq; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("read event %d: %v", i, err)
		}
		if md, _ := m.Metadata(); md.Sequence.Stream != i {
			t.Fatalf("event %d has sequence %d", i, md.Sequence.Stream)
		}
	}

	forged := []byte("forged")
	// Publishing is refused wherever an event could land: the input
	// subjects the stream maps, the stored subjects, the buckets.
	t.Run("publish", func(t *testing.T) {
		for _, subj := range []string{
			events.InputPrefix + ".ConfigMap.shop.web",
			events.StoredPrefix + ".0.ConfigMap.shop.web",
			"$KV." + auth.StateBucket + ".ConfigMap.shop.web",
			"$KV." + events.MembersBucket + ".member.x",
			"$O." + events.SnapshotBucket + ".M.x",
		} {
			t.Run(subj, func(t *testing.T) {
				t.Parallel()
				if _, err := js.Publish(ctx, subj, forged); err == nil {
					t.Fatal("publish acknowledged")
				}
				v.waitFor(t, subj)
			})
		}
	})
	calls := []struct {
		name, subject string
		call          func() error
	}{
		{"delete the stream", "STREAM.DELETE", func() error { return js.DeleteStream(ctx, events.StreamName) }},
		{"purge the stream", "STREAM.PURGE", func() error { return stream.Purge(ctx) }},
		{"delete an event", "STREAM.MSG.DELETE", func() error { return stream.DeleteMsg(ctx, 1) }},
		{"update the stream", "STREAM.UPDATE", func() error {
			cfg := stream.CachedInfo().Config
			cfg.Description = "owned"
			_, err := js.UpdateStream(ctx, cfg)
			return err
		}},
		{"create a stream on the log's subjects", "STREAM.CREATE", func() error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHADOW", Subjects: []string{"jp.in.>"}})
			return err
		}},
		{"delete a consumer", "CONSUMER.DELETE", func() error { return js.DeleteConsumer(ctx, events.StreamName, "any") }},
	}
	t.Run("api", func(t *testing.T) {
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if err := c.call(); err == nil {
					t.Fatal("succeeded")
				}
				v.waitFor(t, "$JS.API."+c.subject)
			})
		}
	})
	unchanged(t, a, before)
}

// jetplane itself cannot delete or purge its log: the permissions refuse
// the calls and the stream's config denies them.
func TestInstanceCannotRemoveEvents(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	before := fingerprintOf(t, a)
	nc, v := connectWith(t, a.NATSURL(), a.Creds().InstanceCreds())
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if c := stream.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge {
		t.Fatalf("stream config deny_delete=%t deny_purge=%t", c.DenyDelete, c.DenyPurge)
	}
	t.Run("api", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"STREAM.DELETE":     func() error { return js.DeleteStream(ctx, events.StreamName) },
			"STREAM.PURGE":      func() error { return stream.Purge(ctx) },
			"STREAM.MSG.DELETE": func() error { return stream.DeleteMsg(ctx, 1) },
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if err := call(); err == nil {
					t.Fatal("succeeded")
				}
				v.waitFor(t, "$JS.API."+name+"."+events.StreamName)
			})
		}
	})
	unchanged(t, a, before)
}

// A node agent's credential reaches its own node's work and nothing else.
func TestNodeConfinedToItsOwnNode(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	ctx := context.Background()
	// The buckets an instance keeps for the node agents, with a pod on
	// each of two nodes.
	store, err := a.Log().NodeStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := store.PutWork(ctx, n, "shop", "web-"+n, []byte("pod")); err != nil {
			t.Fatal(err)
		}
	}
	before := fingerprintOf(t, a)

	nc, v := connectAs(t, a, auth.RoleNode, "n1")
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Its own node: heartbeat, watch its work, report status and logs.
	nodes, err := js.KeyValue(ctx, events.NodesBucket)
	if err != nil {
		t.Fatalf("bind %s: %v", events.NodesBucket, err)
	}
	if _, err := nodes.Put(ctx, events.NodeHeartbeatKey("n1"), []byte("beat")); err != nil {
		t.Fatalf("own heartbeat: %v", err)
	}
	mywork, err := js.KeyValue(ctx, events.NodeWorkBucket)
	if err != nil {
		t.Fatalf("bind %s: %v", events.NodeWorkBucket, err)
	}
	w, err := mywork.Watch(ctx, events.NodeWorkFilter("n1"))
	if err != nil {
		t.Fatalf("watch own work: %v", err)
	}
	var keys []string
	for e := range w.Updates() {
		if e == nil {
			break
		}
		keys = append(keys, e.Key())
	}
	_ = w.Stop()
	if len(keys) != 1 || keys[0] != events.NodeWorkKey("n1", "shop", "web-n1") {
		t.Fatalf("own work = %q, want only n1's pod", keys)
	}
	if err := nc.Publish(events.NodeLogsSubject("n1", "shop", "web-n1", "main"), []byte("hello")); err != nil {
		t.Fatal(err)
	}

	// Another node's.
	if _, err := nodes.Put(ctx, events.NodeHeartbeatKey("n2"), []byte("beat")); err == nil {
		t.Error("put another node's heartbeat")
	}
	v.waitFor(t, "$KV."+events.NodesBucket+".n2")
	if _, err := mywork.Watch(ctx, events.NodeWorkFilter("n2")); err == nil {
		t.Error("watched another node's work")
	}
	v.waitFor(t, "$JS.API.CONSUMER.CREATE.KV_"+events.NodeWorkBucket)
	if _, err := mywork.Get(ctx, events.NodeWorkKey("n2", "shop", "web-n2")); err == nil {
		t.Error("read another node's pod")
	}
	for _, subj := range []string{
		events.NodeStatusSubject("n2"),
		events.NodeLogsSubject("n2", "shop", "web-n2", "main"),
		events.InputPrefix + ".ConfigMap.shop.web",
		"$KV." + events.NodeWorkBucket + "." + events.NodeWorkKey("n1", "shop", "web-n1"),
	} {
		if err := nc.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subj)
	}
	// A subscription on another node's inbox, or on the log, is refused.
	if _, err := nc.SubscribeSync(auth.InboxPrefix(auth.RoleNode, "n2") + ".>"); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, auth.InboxPrefix(auth.RoleNode, "n2"))
	if _, err := js.Stream(ctx, events.StreamName); err == nil {
		t.Error("a node looked up the log")
	}
	unchanged(t, a, before)
}

// A revoked credential is disconnected and refused from then on.
func TestRevokedCredentialIsRefused(t *testing.T) {
	a := start(t, app.Config{})
	nc, _ := connectAs(t, a, auth.RoleSubscriber, "leaked")
	if err := a.Creds().Revoke("leaked"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for !nc.IsClosed() && nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("revoked connection still connected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	list, err := a.Creds().List()
	if err != nil || len(list) != 1 || list[0].Revoked == nil {
		t.Fatalf("list = %+v, %v; want one revoked", list, err)
	}
}

// A subscriber may make consumers of its own on the log, but not take the
// runtime's: creating or changing one of its partition consumers, pulling
// from it, acknowledging on it, or the legacy create that names a consumer
// in its body are all refused, and the runtime's consumer is as it was.
func TestSubscriberCannotTakeTheRuntimesConsumers(t *testing.T) {
	a := start(t, app.Config{})
	seed(t, &api.Client{BaseURL: a.URL()})
	before := fingerprintOf(t, a)
	nc, v := connectAs(t, a, auth.RoleSubscriber, "audit")
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	own := events.PartitionConsumer("", 0)
	stream := events.StreamName

	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "audit-reader", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("a subscriber cannot make a durable consumer of its own: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: own, FilterSubject: events.PartitionFilter(1), AckPolicy: jetstream.AckExplicitPolicy,
	}); err == nil {
		t.Fatalf("a subscriber changed %s", own)
	}
	v.waitFor(t, "$JS.API.CONSUMER.CREATE."+stream+"."+own)
	for _, subj := range []string{
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + "." + own,
		"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + own,
		"$JS.ACK." + stream + "." + own + ".1.1.1.1.0",
		"$JS.API.CONSUMER.CREATE." + stream,
	} {
		if err := nc.Publish(subj, []byte(`{"stream_name":"`+stream+`","config":{"name":"`+own+`"}}`)); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subj)
	}

	// The runtime's consumer still reads its own partition.
	inc, _ := connectWith(t, a.NATSURL(), a.Creds().InstanceCreds())
	ijs, err := jetstream.New(inc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ijs.Consumer(ctx, stream, own)
	if err != nil {
		t.Fatalf("the runtime's consumer %s: %v", own, err)
	}
	// It reads partition 0's events of the kinds the instances run
	// (decision 0114), not the partition the subscriber asked for.
	cfg := c.CachedInfo().Config
	filters := append([]string{cfg.FilterSubject}, cfg.FilterSubjects...)
	if !slices.Contains(filters, events.KindPartitionFilter(0, "Pod")) {
		t.Fatalf("%s reads %q, want partition 0's kinds", own, filters)
	}
	for _, f := range filters {
		if f != "" && !strings.HasPrefix(f, strings.TrimSuffix(events.PartitionFilter(0), ">")) {
			t.Fatalf("%s reads %q, want partition 0's kinds", own, filters)
		}
	}
	unchanged(t, a, before)
}
