package security

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// widgetsOnly marks every Widget made.
type widgetsOnly struct{}

func (widgetsOnly) Kinds() []string { return []string{widgetKind} }

func (widgetsOnly) Reconcile(context.Context, *schemas.Object) (controller.Status, time.Duration, error) {
	return controller.Status{Message: "made"}, 0, nil
}

func (widgetsOnly) Delete(context.Context, *schemas.Object) error { return nil }

// prefixOf is what the creds file at path says its consumers' names
// start with, or fallback (what its holder would pick) when it names none.
func prefixOf(t *testing.T, path, fallback string) string {
	t.Helper()
	p, err := events.CredsConsumerPrefix(path)
	if err != nil {
		t.Fatal(err)
	}
	if p == "" {
		return fallback
	}
	return p
}

// consumersOf lists, as the instance sees them, the log's consumers whose
// names start with prefix, with their configuration.
func consumersOf(t *testing.T, js jetstream.JetStream, prefix string) map[string]jetstream.ConsumerConfig {
	t.Helper()
	s, err := js.Stream(context.Background(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]jetstream.ConsumerConfig{}
	list := s.ListConsumers(context.Background())
	for info := range list.Info() {
		if strings.HasPrefix(info.Name, prefix) {
			out[info.Name] = info.Config
		}
	}
	if err := list.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// No outside credential reaches another's consumers. A controller runs
// its partition consumers and a subscriber keeps a durable consumer of
// its own; another subscriber and another controller then try every way
// to them: listing the consumers of the streams they read, and, on every
// name they could know or guess (the controller's name in the consumer
// naming scheme, the subscriber's name), reading the consumer's
// information, pulling its next delivery, creating it again with another
// filter, deleting it, unpinning it and acknowledging on it. None of it
// reaches a victim: the listings are refused, the names they can form
// are not the victims' consumers, a controller acknowledges on and
// unpins no consumer but its own (even one whose name it was told), and afterwards
// the victims' consumers are as they were and the controller still runs
// every change of its kind.
func TestOutsideCredentialsCannotReachOthersConsumers(t *testing.T) {
	a := start(t, app.Config{})
	c := &api.Client{BaseURL: a.URL()}
	seed(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inc, _ := connectWith(t, a.NATSURL(), a.Creds().InstanceCreds())
	ijs, err := jetstream.New(inc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	// The victims: controller widgets, running, and subscriber audit's
	// consumer, named as its credential file says (or after itself).
	widgetsCreds := credFile(t, a, auth.RoleController, "widgets", widgetKind)
	connectWith(t, a.NATSURL(), widgetsCreds) // once the server admits it
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, controller.Config{NATS: a.NATSURL(), Creds: widgetsCreds, Grace: time.Second}, widgetsOnly{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller widgets: %v", err)
		}
	})
	widgetsPrefix := prefixOf(t, widgetsCreds, events.ControllerConsumerPrefix+"widgets")
	applyWidget := func(name string, size int) {
		t.Helper()
		doc := fmt.Sprintf("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: %s, namespace: shop}\nspec: {size: %d}\n", name, size)
		if _, err := c.Apply(ctx, name+".yaml", []byte(doc), ""); err != nil {
			t.Fatal(err)
		}
		k := projections.Key{Kind: widgetKind, Namespace: "shop", Name: name}
		waitState(t, a, func() bool {
			o := a.Store().Get(k)
			return reconcilers.IsReady(o) && o.GetStatus().GetObservedGeneration() == o.GetMetadata().GetGeneration()
		})
	}
	applyWidget("w1", 1)
	pollUntil(t, "widgets' partition consumers", func() bool { return len(consumersOf(t, ijs, widgetsPrefix)) == a.Log().Partitions() })

	auditCreds := credFile(t, a, auth.RoleSubscriber, "audit")
	anc, _ := connectWith(t, a.NATSURL(), auditCreds)
	ajs, err := jetstream.New(anc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	auditConsumer := prefixOf(t, auditCreds, "audit")
	if _, err := ajs.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{
		Durable: auditConsumer, FilterSubject: "jp.ev.>", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatalf("audit's own consumer: %v", err)
	}

	victims := consumersOf(t, ijs, widgetsPrefix)
	victims[auditConsumer] = consumersOf(t, ijs, auditConsumer)[auditConsumer]
	victimNames := slices.Sorted(func(yield func(string) bool) {
		for n := range victims {
			if !yield(n) {
				return
			}
		}
	})

	// What an attacker can name: the controller's name in the naming
	// scheme of its partition consumers (both forms), and the subscriber's.
	var guessable []string
	for p := range a.Log().Partitions() {
		guessable = append(guessable,
			events.PartitionConsumer(events.ControllerConsumerPrefix+"widgets", p),
			events.ExplicitAckPartitionConsumer(events.ControllerConsumerPrefix+"widgets", p))
	}
	guessable = append(guessable, "audit", "audit-feed", "widgets")
	for _, name := range guessable {
		if _, ok := victims[name]; ok {
			t.Errorf("consumer %s is named as anyone could guess", name)
		}
	}

	thiefCreds := credFile(t, a, auth.RoleSubscriber, "thief")
	gadgetsCreds := credFile(t, a, auth.RoleController, "gadgets", gadgetKind)
	for _, attacker := range []struct{ name, creds string }{{"subscriber", thiefCreds}, {"controller", gadgetsCreds}} {
		t.Run(attacker.name, func(t *testing.T) {
			nc, v := connectWith(t, a.NATSURL(), attacker.creds)
			js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Run("lists no consumers", func(t *testing.T) {
				for _, s := range []string{events.StreamName, events.LogsStream, "KV_" + auth.StateBucket, "OBJ_" + events.SnapshotBucket} {
					for _, what := range []string{"NAMES", "LIST"} {
						subj := "$JS.API.CONSUMER." + what + "." + s
						t.Run(subj, func(t *testing.T) {
							t.Parallel()
							m, err := nc.Request(subj, nil, 2*time.Second)
							if err == nil && !bytes.Contains(m.Data, []byte(`"error"`)) {
								t.Errorf("listed: %.200s", m.Data)
							}
							v.waitFor(t, subj)
						})
					}
				}
			})
			for _, name := range guessable {
				t.Run("reaches nothing as "+name, func(t *testing.T) {
					_, victim := victims[name]
					if _, err := js.Consumer(ctx, events.StreamName, name); victim && err == nil {
						t.Errorf("read the information of consumer %s", name)
					}
					req := []byte(`{"batch":1,"no_wait":true,"group":"jp"}`)
					if m, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT."+events.StreamName+"."+name, req, 2*time.Second); err == nil && len(m.Data) > 0 && m.Header.Get("Status") == "" && victim {
						t.Errorf("pulled a delivery of consumer %s: %s", name, m.Subject)
					}
					// A subscriber may not delete or unpin (a refusal the
					// server answers with no reply): sent, not waited on.
					_ = nc.PublishRequest("$JS.API.CONSUMER.DELETE."+events.StreamName+"."+name, nc.NewRespInbox(), nil)
					_ = nc.PublishRequest("$JS.API.CONSUMER.UNPIN."+events.StreamName+"."+name, nc.NewRespInbox(), []byte(`{"group":"jp"}`))
					_, _ = js.CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{
						Durable: name, FilterSubject: events.PartitionFilter(0), AckPolicy: jetstream.AckAllPolicy,
					})
					_ = nc.Publish("$JS.ACK."+events.StreamName+"."+name+".1.9.9.1.0", nil)
				})
			}
			if attacker.name == "controller" {
				// Even told the names, a controller acknowledges on and
				// unpins no consumer but its own.
				for _, name := range victimNames {
					for _, subj := range []string{
						"$JS.ACK." + events.StreamName + "." + name + ".1.9.9.1.0",
						"$JS.API.CONSUMER.UNPIN." + events.StreamName + "." + name,
					} {
						if err := nc.Publish(subj, []byte(`{"group":"jp"}`)); err != nil {
							t.Fatal(err)
						}
						v.waitFor(t, subj)
					}
				}
			}
			_ = nc.Flush()
		})
	}

	// The victims' consumers are as they were, and the controller still
	// runs its kind's changes.
	now := consumersOf(t, ijs, widgetsPrefix)
	now[auditConsumer] = consumersOf(t, ijs, auditConsumer)[auditConsumer]
	for _, name := range victimNames {
		got, ok := now[name]
		if !ok {
			t.Errorf("consumer %s is gone", name)
			continue
		}
		want := victims[name]
		if got.FilterSubject != want.FilterSubject || !slices.Equal(got.FilterSubjects, want.FilterSubjects) || got.AckPolicy != want.AckPolicy {
			t.Errorf("consumer %s changed: %+v, was %+v", name, got, want)
		}
	}
	for i := range 8 {
		applyWidget(fmt.Sprintf("w%d", i+2), i)
	}
	applyWidget("w1", 2)
	if _, err := ajs.Consumer(ctx, events.StreamName, auditConsumer); err != nil {
		t.Errorf("audit's consumer: %v", err)
	}
}
