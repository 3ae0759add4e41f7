// Command probe is jetplane serve with one extra reconciler, for tests that
// need real processes: it reconciles kind Probe by sleeping (--sleep) and
// records every run, outside jetplane, as lines in a file (--runs):
//
//	start  <instance> <key> <generation> <unix-nanos>
//	end    <instance> <key> <generation> <unix-nanos>
//	cancel <instance> <key> <generation> <unix-nanos>
//
// A run's side effect is its end line, written only while the run's
// context holds (so only while the instance's membership lease holds). A
// run whose context ended writes a cancel line instead, with the time after
// which it did nothing: now, or the end of the lease it ran under if that
// came first (a process paused mid-run resumes long after its lease ended,
// finds its context cancelled, and stops). A run killed part-way leaves a
// start alone.
//
// With --nats-only it runs just a NATS node (the embedded server, with the
// cluster flags), for tests whose jetplane processes use an outside NATS
// cluster (--nats-url): killing one of those leaves the cluster whole.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

func main() {
	var cfg app.Config
	var runs string
	var sleep time.Duration
	flag.StringVar(&cfg.DataDir, "data", "", "store directory")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "API address")
	flag.IntVar(&cfg.NATSPort, "nats-port", -1, "embedded NATS port (-1: any free one)")
	flag.StringVar(&cfg.Instance, "instance", "probe", "instance name")
	flag.StringVar(&runs, "runs", "", "file to record runs in (required)")
	flag.DurationVar(&sleep, "sleep", 0, "how long each run takes")
	var clusterAt, routes string
	flag.StringVar(&cfg.NATSName, "nats-name", "", "embedded NATS server name (unique in a cluster)")
	flag.StringVar(&cfg.NATSCluster.Name, "nats-cluster", "", "cluster to join")
	flag.StringVar(&clusterAt, "nats-cluster-listen", "", "host:port for routes")
	flag.StringVar(&routes, "nats-routes", "", "route URLs, comma-separated")
	flag.IntVar(&cfg.Log.Replicas, "replicas", 1, "log replicas")
	flag.StringVar(&cfg.NATS.URLs, "nats-url", "", "outside NATS cluster to use, comma-separated URLs (no embedded server)")
	flag.StringVar(&cfg.NATS.CredsFile, "nats-creds", "", "credentials for --nats-url")
	authDir := flag.String("nats-auth-dir", "", "credentials store of the embedded NATS node (default DATA/auth)")
	flag.BoolVar(&cfg.SubscriptionPrivateSinks, "subscription-private-sinks", false, "let Subscriptions deliver to loopback addresses (tests' sinks)")
	natsOnly := flag.Bool("nats-only", false, "run only the embedded NATS node; print its client URL")
	flag.Parse()
	if clusterAt != "" {
		host, port, err := net.SplitHostPort(clusterAt)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe: --nats-cluster-listen:", err)
			os.Exit(2)
		}
		cfg.NATSCluster.Host = host
		cfg.NATSCluster.Port, _ = strconv.Atoi(port)
	}
	if routes != "" {
		cfg.NATSCluster.Routes = strings.Split(routes, ",")
	}
	if *natsOnly {
		runNATS(cfg, *authDir)
		return
	}
	if runs == "" || (cfg.DataDir == "" && cfg.NATS.URLs == "") {
		fmt.Fprintln(os.Stderr, "probe: --runs and one of --data and --nats-url are required")
		os.Exit(2)
	}
	f, err := os.OpenFile(runs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	record := func(what string, obj *schemas.Object, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line with O_APPEND: a line is whole or absent.
		fmt.Fprintf(f, "%s %s %s/%s %d %d\n", what, cfg.Instance, obj.Metadata.Namespace, obj.Metadata.Name, obj.Metadata.Generation, at.UnixNano())
	}
	cfg.Reconcilers = []reconcilers.Reconciler{reconcilers.Funcs{
		KindList: []string{"Probe"},
		ReconcileFunc: func(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
			record("start", obj, time.Now())
			select {
			case <-time.After(sleep):
			case <-ctx.Done():
			}
			// The side effect, only with the context (and so the lease)
			// holding: after a pause both cases above are ready at once.
			if err := ctx.Err(); err != nil {
				at := time.Now()
				if until, ok := reconcilers.LeaseDeadline(ctx); ok && until.Before(at) {
					at = until
				}
				record("cancel", obj, at)
				return reconcilers.Result{}, err
			}
			record("end", obj, time.Now())
			return reconcilers.Result{}, nil
		},
	}}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	// Tests read the address from the first line of stdout.
	fmt.Println(a.URL())
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// runNATS runs one NATS node until SIGTERM or SIGINT; the first line of
// stdout is its client URL.
func runNATS(cfg app.Config, authDir string) {
	if cfg.DataDir == "" {
		fmt.Fprintln(os.Stderr, "probe: --nats-only needs --data")
		os.Exit(2)
	}
	srv, err := embedded.Start(embedded.Config{
		StoreDir: cfg.DataDir, Port: cfg.NATSPort, ServerName: cfg.NATSName, Cluster: cfg.NATSCluster, AuthDir: authDir,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	fmt.Println(srv.ClientURL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Shutdown()
}
