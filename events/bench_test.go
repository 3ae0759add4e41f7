package events_test

import (
	"context"
	"fmt"
	"testing"

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
		for _, mode := range []string{"raw-sync", "raw-async", "jetplane-sync", "jetplane-batch", "jetplane-async"} {
			b.Run(fmt.Sprintf("sync=%s/%s", sync, mode), func(b *testing.B) {
				_, nc := testenv.NATSWith(b, embedded.Config{SyncAlways: sync == "always"})
				ctx := context.Background()
				l, err := events.Open(ctx, nc, events.Config{})
				if err != nil {
					b.Fatal(err)
				}
				js, _ := jetstream.New(nc)
				payload, _ := proto.Marshal(benchEvent(0))
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
					}
					<-js.PublishAsyncComplete()
				case "jetplane-sync":
					for i := range b.N {
						if _, err := l.Append(ctx, events.Entry{Event: benchEvent(i), Expect: 0}); err != nil {
							b.Fatal(err)
						}
					}
				case "jetplane-batch", "jetplane-async":
					for start := 0; start < b.N; start += events.MaxBatch {
						n := min(events.MaxBatch, b.N-start)
						entries := make([]events.Entry, n)
						for j := range entries {
							entries[j] = events.Entry{Event: benchEvent(start + j), Expect: 0}
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

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
