package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// What security costs, both sides measured in the same run over TCP (an
// instance's own in-process connection skips TLS, so the network path is
// where TLS can cost anything):
//
//	open      NATS without credentials or TLS, API over HTTP without tokens
//	          (what jetplane was before)
//	secured   NATS with NKey credentials and permissions over TLS, API over
//	          HTTPS with a bearer token
var securityModes = []string{"open", "secured"}

// natsFor starts the NATS server of mode and returns how to reach it.
func natsFor(b *testing.B, mode string) (events.ConnectOptions, pki) {
	b.Helper()
	if mode == "open" {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoSigs: true, MaxPayload: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(wait) {
			b.Fatal("nats not ready")
		}
		b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		return events.ConnectOptions{URLs: ns.ClientURL()}, pki{}
	}
	p := newPKI(b)
	srv, err := embedded.Start(embedded.Config{StoreDir: b.TempDir(), Port: -1, TLS: embedded.TLSConfig{CertFile: p.Cert, KeyFile: p.Key, CAFile: p.CA}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	return events.ConnectOptions{URLs: srv.ClientURL(), CredsFile: srv.Creds().InstanceCreds(), CAFile: p.CA}, p
}

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

// BenchmarkSecurityAppend appends b.N events through jetplane's async
// append path (each with its dedupe id and concurrency check).
func BenchmarkSecurityAppend(b *testing.B) {
	for _, mode := range securityModes {
		b.Run(mode, func(b *testing.B) {
			co, _ := natsFor(b, mode)
			nc, err := events.Connect(co)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			ctx := context.Background()
			l, err := events.Open(ctx, nc, events.Config{})
			if err != nil {
				b.Fatal(err)
			}
			entries := make([]events.Entry, b.N)
			for i := range entries {
				entries[i] = events.Entry{Event: benchEvent(i)}
			}
			b.ResetTimer()
			start := time.Now()
			for from := 0; from < b.N; from += 1000 {
				_, errs := l.AppendAsync(ctx, entries[from:min(from+1000, b.N)])
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSecurityReconcile applies 2,000 objects in batches of 500 through
// the API and waits until every one is reconciled and Ready: the apply,
// the runtime's consumer, the run and the status write all cross the
// secured paths.
func BenchmarkSecurityReconcile(b *testing.B) {
	const n = 2000
	for _, mode := range securityModes {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				co, p := natsFor(b, mode)
				cfg := app.Config{NATS: co, Reconcilers: []reconcilers.Reconciler{reconcilers.Funcs{
					KindList: []string{"Bench"},
					ReconcileFunc: func(context.Context, *schemas.Object) (reconcilers.Result, error) {
						return reconcilers.Result{Message: "done"}, nil
					},
				}}, EncryptionKeyFile: keyFile(b)}
				c := &api.Client{}
				if mode == "secured" {
					cfg.TLSCertFile, cfg.TLSKeyFile = p.Cert, p.Key
					cfg.Principals = []api.Principal{{Token: "bench-token", Name: "bench", Role: api.RoleWriter}}
					cfg.APILimits = api.Limits{Rate: -1}
					c.Token = "bench-token"
					c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}}
				}
				a, stop := runBench(b, cfg)
				c.BaseURL = a.URL()
				ready := make(chan struct{})
				ch, stopWatch, err := a.Store().Watch(projections.Query{Kind: "Bench"}, a.Store().Seq())
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					seen := map[string]bool{}
					for ch := range ch {
						if ch.Object != nil && reconcilers.IsReady(ch.Object) && ch.Object.GetStatus().GetObservedGeneration() == 1 {
							seen[ch.Key.Name] = true
							if len(seen) == n {
								close(ready)
								return
							}
						}
					}
				}()
				b.StartTimer()
				start := time.Now()
				for from := 0; from < n; from += 500 {
					var sb strings.Builder
					for i := from; i < from+500; i++ {
						fmt.Fprintf(&sb, "{\"apiVersion\":\"v1\",\"kind\":\"Bench\",\"metadata\":{\"name\":\"o-%d\",\"namespace\":\"bench\"},\"spec\":{\"i\":%d}}\n---\n", i, i)
					}
					if _, err := c.ApplyBrief(context.Background(), "bench", []byte(sb.String()), ""); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-ready:
				case <-time.After(5 * time.Minute):
					b.Fatal("objects not Ready after 5 minutes")
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "objects/s")
				b.StopTimer()
				stopWatch()
				stop()
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// runBench is run for benchmarks.
func runBench(b *testing.B, cfg app.Config) (*app.App, func()) {
	b.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.Log.Partitions = 4
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(wait)
	for !ready(a) {
		if time.Now().After(deadline) {
			b.Fatal("not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, func() { cancel(); <-done }
}

func ready(a *app.App) bool {
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := probe.Get(a.URL() + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
