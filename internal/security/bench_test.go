package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
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

// What security costs. Each benchmark iteration measures every mode once,
// in an order that rotates between iterations, and reports each mode's
// figure and its ratio to "open", so every ratio compares runs made side
// by side on the same (shared, noisy) machine. Everything goes over TCP:
// an instance's own in-process connection skips TLS, so the network path
// is where security can cost anything.
//
//	open      NATS without credentials or TLS, API over HTTP without tokens
//	          (jetplane before this change)
//	auth      NATS with NKey credentials and permissions, API with a token
//	auth+tls  the same over TLS (NATS client port and HTTPS)
var securityModes = []string{"open", "auth", "auth+tls"}

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
	cfg := embedded.Config{StoreDir: b.TempDir(), Port: -1}
	p := newPKI(b)
	if mode == "auth+tls" {
		cfg.TLS = embedded.TLSConfig{CertFile: p.Cert, KeyFile: p.Key, CAFile: p.CA}
	}
	srv, err := embedded.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	co := events.ConnectOptions{URLs: srv.ClientURL(), CredsFile: srv.Creds().InstanceCreds()}
	if mode == "auth+tls" {
		co.CAFile = p.CA
	}
	return co, p
}

// interleaved sets every mode up once (setup returns a step that does
// one slice of the work and how many units it did), then runs `rounds`
// rounds, each mode's step once per round in an order that rotates. It
// reports per mode the units per second over its own steps' time
// ("<mode>-<unit>/s") and the process CPU time per unit over its steps
// ("<mode>-cpu-µs/<unit>"; client and server share the process), and each
// against open: "<mode>/open" (throughput ratio) and "<mode>/open-cpu"
// (CPU ratio). Slices of a fraction of a second side by side keep the
// machine's other load from favouring one mode; CPU time is the steadier
// figure on a shared machine, since waiting for the CPU costs none.
func interleaved(b *testing.B, unit string, rounds int, setup func(mode string) func() int) {
	for range b.N {
		steps := map[string]func() int{}
		for _, mode := range securityModes {
			steps[mode] = setup(mode)
		}
		took, cpu := map[string]time.Duration{}, map[string]time.Duration{}
		done := map[string]int{}
		for r := range rounds {
			for j := range securityModes {
				mode := securityModes[(r+j)%len(securityModes)]
				start, startCPU := time.Now(), cpuTime()
				done[mode] += steps[mode]()
				took[mode] += time.Since(start)
				cpu[mode] += cpuTime() - startCPU
			}
		}
		rate := func(mode string) float64 { return float64(done[mode]) / took[mode].Seconds() }
		perUnit := func(mode string) float64 { return float64(cpu[mode].Microseconds()) / float64(done[mode]) }
		for _, mode := range securityModes {
			b.ReportMetric(rate(mode), mode+"-"+unit+"/s")
			b.ReportMetric(perUnit(mode), mode+"-cpu-µs/"+unit)
			if mode != "open" {
				b.ReportMetric(rate(mode)/rate("open"), mode+"/open")
				b.ReportMetric(perUnit(mode)/perUnit("open"), mode+"/open-cpu")
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// BenchmarkSecurityAppend appends 20,000 events per mode, 1,000 per step,
// through jetplane's async append path (each with its dedupe id and
// concurrency check).
func BenchmarkSecurityAppend(b *testing.B) {
	const n, step = 20_000, 1000
	interleaved(b, "event", n/step, func(mode string) func() int {
		co, _ := natsFor(b, mode)
		nc, err := events.Connect(co)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		ctx := context.Background()
		l, err := events.Open(ctx, nc, events.Config{})
		if err != nil {
			b.Fatal(err)
		}
		entries := make([]events.Entry, n)
		for i := range entries {
			entries[i] = events.Entry{Event: benchEvent(i)}
		}
		next := 0
		return func() int {
			_, errs := l.AppendAsync(ctx, entries[next:next+step])
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			next += step
			return step
		}
	})
}

// BenchmarkSecurityReconcile applies 5,000 objects per mode, 500 per step
// in one apply, through the API, each step ending when all of them are
// reconciled and Ready: the apply, the runtime's consumer, the run and the
// status write all cross the secured paths.
func BenchmarkSecurityReconcile(b *testing.B) {
	const n, step = 5000, 500
	interleaved(b, "object", n/step, func(mode string) func() int {
		co, p := natsFor(b, mode)
		cfg := app.Config{NATS: co, Reconcilers: []reconcilers.Reconciler{reconcilers.Funcs{
			KindList: []string{"Bench"},
			ReconcileFunc: func(context.Context, *schemas.Object) (reconcilers.Result, error) {
				return reconcilers.Result{Message: "done"}, nil
			},
		}}, EncryptionKeyFile: keyFile(b)}
		c := &api.Client{}
		if mode != "open" {
			cfg.Principals = []api.Principal{{Token: "bench-token", Name: "bench", Role: api.RoleWriter}}
			c.Token = "bench-token"
		}
		if mode == "auth+tls" {
			cfg.TLSCertFile, cfg.TLSKeyFile = p.Cert, p.Key
			c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}}
		}
		a, stop := runBench(b, cfg)
		b.Cleanup(stop)
		c.BaseURL = a.URL()
		ready := make(chan string, n)
		ch, stopWatch, err := a.Store().Watch(projections.Query{Kind: "Bench"}, a.Store().Seq())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stopWatch)
		go func() {
			for ch := range ch {
				if ch.Object != nil && reconcilers.IsReady(ch.Object) && ch.Object.GetStatus().GetObservedGeneration() == 1 {
					ready <- ch.Key.Name
				}
			}
		}()
		next := 0
		return func() int {
			var sb strings.Builder
			for i := next; i < next+step; i++ {
				fmt.Fprintf(&sb, "{\"apiVersion\":\"v1\",\"kind\":\"Bench\",\"metadata\":{\"name\":\"o-%d\",\"namespace\":\"bench\"},\"spec\":{\"i\":%d}}\n---\n", i, i)
			}
			if _, err := c.ApplyBrief(context.Background(), "bench", []byte(sb.String()), ""); err != nil {
				b.Fatal(err)
			}
			seen := map[string]bool{}
			timeout := time.After(5 * time.Minute)
			for len(seen) < step {
				select {
				case name := <-ready:
					var i int
					if _, err := fmt.Sscanf(name, "o-%d", &i); err == nil && i >= next && i < next+step {
						seen[name] = true
					}
				case <-timeout:
					b.Fatalf("%s: %d of %d objects Ready after 5 minutes", mode, len(seen), step)
				}
			}
			next += step
			return step
		}
	})
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
