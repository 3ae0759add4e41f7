package events_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

// benchEvent is a typical Applied event: a small ConfigMap-like object.
func benchEvent(i int) *schemas.Event {
	spec, _ := structpb.NewStruct(map[string]any{"LOG_LEVEL": "info", "replicas": float64(3), "url": "https://checkout.shop.svc"})
	k := &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "bench", Name: fmt.Sprintf("cm-%d", i)}
	return &schemas.Event{
		Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k, Actor: "user/bench", Time: timestamppb.Now(),
		Object: &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Spec: spec, Metadata: &schemas.ObjectMeta{
			Name: k.Name, Namespace: k.Namespace, Labels: map[string]string{"app": "web"}, Generation: 1,
		}},
	}
}

// BenchmarkAppend compares jetplane's append paths with raw JetStream
// publishes of the same payloads to the same stream, in the same run.
// Every jetplane append carries a concurrency check (each key is new).
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []string{"default", "always"} {
		for _, mode := range []string{"raw-sync", "raw-async", "raw-async-with-headers", "jetplane-sync", "jetplane-batch", "jetplane-async"} {
			b.Run(fmt.Sprintf("sync=%s/%s", sync, mode), func(b *testing.B) {
				_, nc := testenv.NATSWith(b, embedded.Config{SyncAlways: sync == "always"})
				ctx := context.Background()
				l, err := events.Open(ctx, nc, events.Config{})
				if err != nil {
					b.Fatal(err)
				}
				js, _ := jetstream.New(nc)
				payload, _ := proto.Marshal(benchEvent(0))
				// The caller builds its events; jetplane's work starts at
				// append (encoding included), as raw publishing starts from
				// an encoded payload.
				var evs []*schemas.Event
				if strings.HasPrefix(mode, "jetplane") {
					evs = make([]*schemas.Event, b.N)
					for i := range evs {
						evs[i] = benchEvent(i)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				switch mode {
				case "raw-sync":
					for i := range b.N {
						if _, err := js.Publish(ctx, fmt.Sprintf("jp.in.ConfigMap.bench.cm-%d", i), payload); err != nil {
							b.Fatal(err)
						}
					}
				case "raw-async":
					for i := range b.N {
						if _, err := js.PublishAsync(fmt.Sprintf("jp.in.ConfigMap.bench.cm-%d", i), payload); err != nil {
							b.Fatal(err)
						}
						window(js, i)
					}
					<-js.PublishAsyncComplete()
				case "raw-async-with-headers":
					// The server-side features jetplane asks for (dedupe id,
					// expected version), without jetplane's client code.
					for i := range b.N {
						m := nats.NewMsg(fmt.Sprintf("jp.in.ConfigMap.bench.cm-%d", i))
						m.Data = payload
						m.Header.Set("Nats-Msg-Id", fmt.Sprint("id-", i))
						m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
						if _, err := js.PublishMsgAsync(m); err != nil {
							b.Fatal(err)
						}
						window(js, i)
					}
					<-js.PublishAsyncComplete()
				case "jetplane-sync":
					for i := range b.N {
						if _, err := l.Append(ctx, events.Entry{Event: evs[i], Expect: 0}); err != nil {
							b.Fatal(err)
						}
					}
				case "jetplane-batch", "jetplane-async":
					for start := 0; start < b.N; start += events.MaxBatch {
						n := min(events.MaxBatch, b.N-start)
						entries := make([]events.Entry, n)
						for j := range entries {
							entries[j] = events.Entry{Event: evs[start+j], Expect: 0}
						}
						if mode == "jetplane-batch" {
							if _, err := l.AppendBatch(ctx, entries); err != nil {
								b.Fatal(err)
							}
							continue
						}
						if _, errs := l.AppendAsync(ctx, entries); errs != nil {
							b.Fatal(firstErr(errs))
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(0, "ns/op")
				if n, _ := l.Count(ctx); n != uint64(b.N) {
					b.Fatalf("log holds %d events, want %d", n, b.N)
				}
			})
		}
	}
}

// window waits for outstanding acknowledgements after every MaxBatch
// publishes, as jetplane's batched paths do, so raw and jetplane publishers
// keep the same number of events in flight.
func window(js jetstream.JetStream, i int) {
	if (i+1)%events.MaxBatch == 0 {
		<-js.PublishAsyncComplete()
	}
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
