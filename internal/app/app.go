// Package app assembles jetplane's parts into one running process: the log
// (an embedded NATS server, or an outside NATS deployment), the projection,
// the gate, the Kubernetes bridge and the HTTP API. `jetplane serve` runs
// it; end-to-end tests and benchmarks run it in-process.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/console"
	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/internal/retry"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/reconcilers/queue"
)

// Config is everything `jetplane serve` can be told.
type Config struct {
	// DataDir holds the embedded NATS server's store. Ignored with NATS.URLs.
	DataDir string
	// Listen is the API's address (default 127.0.0.1:7070; port 0 picks one).
	Listen string
	// NATS connects to an outside deployment instead of embedding a server.
	NATS events.ConnectOptions
	// NATSHost and NATSPort are where the embedded server listens for
	// outside clients (default 127.0.0.1:4222; port -1 picks one).
	NATSHost string
	NATSPort int
	// NATSName names the embedded server; required, and unique, in a
	// cluster.
	NATSName string
	// NATSCluster joins the embedded server to a cluster of jetplane
	// processes (see embedded.ClusterConfig).
	NATSCluster embedded.ClusterConfig
	// NATSLogs makes the embedded server log to stderr.
	NATSLogs bool
	// NATSAuthDir is the embedded server's credentials store (default
	// DataDir/auth); see package events/auth.
	NATSAuthDir string
	// SyncAlways fsyncs every event before acknowledging it; otherwise the
	// embedded server fsyncs every SyncInterval (default 2 min).
	SyncAlways   bool
	SyncInterval time.Duration
	// AtomicGroups overrides how the gate commits concurrent
	// single-object writes together (decision 0051): as atomic batches
	// (default with SyncAlways) or pipelined (default otherwise).
	AtomicGroups *bool
	// ServerSync, with SyncAlways on a standalone embedded server, leaves
	// every fsync of the log to the server, per write (true), instead of
	// the log's own fsyncs that cover every write acknowledged before
	// them (false, the default; decision 0083). Durability is the same:
	// no append is answered before it is fsynced.
	ServerSync bool
	Log        events.Config
	// Tokens maps API bearer tokens to user names (admins); with
	// Principals also empty, the API is open.
	Tokens map[string]string
	// Principals are API tokens with a role and namespaces.
	Principals []api.Principal
	// EncryptionKeyFile holds the key-encryption keys that seal Secrets
	// (package bridge/seal). Default with the embedded server: one
	// generated in its credentials store; with an outside NATS and no key
	// file, Secrets with values are refused.
	EncryptionKeyFile string
	// APILimits bound each API token's request rate, watches and pages.
	APILimits api.Limits
	// NATSTLS makes the embedded server's client port and routes speak TLS.
	NATSTLS embedded.TLSConfig
	// TLSCertFile and TLSKeyFile make the API serve HTTPS only.
	TLSCertFile, TLSKeyFile string
	// Clusters are the Kubernetes clusters the bridge watches (`serve
	// --clusters FILE`, see kube.LoadFile); empty runs no bridge. The same
	// clusters' client configs are what an Apply reconciler needs:
	// Clusters.RESTConfigs() before New, App.ClusterConfig after.
	Clusters kube.Clusters
	// Reconcilers run in this process; their kinds are finalized by them,
	// every other kind at once on delete.
	Reconcilers []reconcilers.Reconciler
	// Instance names this process in reconcilers' actors; default host-pid.
	Instance string
	// Queue tunes the reconcilers' queues.
	Queue queue.Config
	// Pods configures the Pod and Node kinds and the local node agent.
	Pods PodsConfig
	// Workloads configures the Deployment, ReplicaSet, Job and DaemonSet
	// controllers (workloads.go).
	Workloads WorkloadsConfig
	// SubscriptionPrivateSinks lets Subscriptions deliver to loopback,
	// private and link-local addresses (refused by default: a subscription
	// must not reach into the control plane's own network).
	SubscriptionPrivateSinks bool
	Logger                   *slog.Logger
}

// App is a running jetplane process.
type App struct {
	cfg       Config
	srv       *embedded.Server
	nc        *nats.Conn
	log       *events.Log
	store     *projections.Store
	projector *projections.Projector
	api       *api.Server
	runtime   *reconcilers.Runtime
	gate      *gate.Gate
	// door is the gate's way in for the events it does not compose:
	// statuses, finalizations, evictions and bindings (decision 0066).
	door     *gate.Door
	stopKeys func()       // ends the watch of destroyed data keys
	bridge   *kube.Bridge // nil without clusters
	listener net.Listener
	seal     *seal.Sealer // nil without a key file (secrets.go)
	pods     *pods
	// memberNC carries membership heartbeats and the lease alone;
	// members is the membership joined through it.
	memberNC *nats.Conn
	members  atomic.Pointer[events.Members]
	// controllers is the door of out-of-process controllers' writes
	// (controllers.go); nil with an outside NATS.
	controllers *gate.Controllers
	ctlKinds    *controllerKinds

	// The chain over the stored log (integrity.go); nil with an outside NATS.
	keeper   *integrity.Keeper
	monitor  *integrity.Monitor
	resyncMu sync.Mutex
	resync   *integrity.Checkpoint // a cluster node taking the log again up to here
	// foldTo is, once such a node holds the log again, the sequence its
	// projection must fold before it is ready (0: none).
	foldTo uint64
}

// New starts the log and builds every part; Run starts them.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	a := &App{cfg: cfg}
	checkAppendOnly := false
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if cfg.NATS.URLs != "" {
		if a.nc, err = events.Connect(cfg.NATS); err != nil {
			return nil, err
		}
		checkAppendOnly = true
		cfg.Log.RequireAppendOnly = true
	} else {
		if cfg.DataDir == "" {
			return nil, errors.New("data dir: empty; give --data or an outside NATS with --nats-url")
		}
		port := cfg.NATSPort
		if port == 0 {
			port = 4222
		}
		if err := a.checkLog(); err != nil {
			return nil, err
		}
		// With --sync=always a standalone server writes without fsyncs of
		// its own on the log's stream: the log makes its writes durable
		// in shared fsyncs before answering any (decision 0083).
		logSyncs := cfg.SyncAlways && !cfg.ServerSync && cfg.NATSCluster.Name == ""
		a.srv, err = embedded.Start(embedded.Config{
			StoreDir: cfg.DataDir, Host: cfg.NATSHost, Port: port, ServerName: cfg.NATSName,
			SyncAlways: cfg.SyncAlways && !logSyncs, SyncInterval: cfg.SyncInterval, Cluster: cfg.NATSCluster, Logs: cfg.NATSLogs,
			AuthDir: cfg.NATSAuthDir, TLS: cfg.NATSTLS,
		})
		if err != nil {
			return nil, err
		}
		if a.nc, err = a.srv.Connect("jetplane"); err != nil {
			return nil, err
		}
		cfg.Logger.Info("embedded nats started", "store", cfg.DataDir, "url", a.srv.ClientURL(), "sync_always", cfg.SyncAlways, "credentials", a.srv.Creds().Dir())
		// A failed append names the store's trouble (a full disk).
		cfg.Log.StoreError = func(fresh bool) error {
			if err := a.integrityErr(); err != nil {
				return err
			}
			if fresh {
				return a.srv.StoreErrorNow()
			}
			return a.srv.StoreError()
		}
		if logSyncs {
			// The log waits for its own fsyncs, so the reconcilers' statuses
			// need no atomic batches (GroupCommit below).
			cfg.Log.Sync = a.srv.SyncStream
		}
	}
	var rawBlobs *events.Blobs
	cfg.Log.AtomicGroups = atomicGroups(cfg)
	if a.log, rawBlobs, err = openLog(ctx, a.nc, cfg.Log, cfg.Logger); err != nil {
		return nil, err
	}
	var blobs projections.Blobs
	if rawBlobs != nil {
		blobs = rawBlobs // never a nil *events.Blobs in the interface
	}
	if a.keeper != nil && rawBlobs != nil {
		// Only a snapshot whose bytes this instance stored is used.
		snaps, err := integrity.NewSnapshots(rawBlobs, a.keeper.Dir(), cfg.Logger)
		if err != nil {
			return nil, err
		}
		if _, err := snaps.Missing(ctx); err != nil {
			cfg.Logger.Warn("integrity: listing snapshots failed", "err", err)
		}
		blobs = snaps
	}
	if checkAppendOnly {
		// An outside deployment is not ours to trust: refuse a log that
		// someone could delete or purge.
		if err := a.log.CheckAppendOnly(ctx); err != nil {
			return nil, err
		}
	}
	a.store = projections.NewStore(projections.StoreOptions{})
	a.door = gate.NewDoor(a.log, a.store)
	if a.projector, err = projections.NewProjector(projections.ProjectorConfig{
		Log: a.log, Store: a.store, Blobs: blobs, Logger: cfg.Logger,
	}); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if a.seal, err = a.sealer(ctx); err != nil {
		return nil, err
	}
	podRecs, err := a.podReconcilers(ctx)
	if err != nil {
		return nil, err
	}
	recs := append(slices.Clone(cfg.Reconcilers), podRecs...)
	charts, err := openCharts(ctx, a.log, cfg.Logger)
	if err != nil {
		return nil, err
	}
	var ar *apply.Reconciler
	if len(cfg.Clusters) > 0 {
		// With clusters, jetplane pushes Apply objects into them.
		rcs, err := cfg.Clusters.RESTConfigs()
		if err != nil {
			return nil, err
		}
		if ar, err = apply.New(apply.Config{Clusters: rcs, State: a.store}); err != nil {
			return nil, err
		}
		recs = append(slices.Clone(recs), revealApply{ar, a.seal})
	}
	hr, err := a.newHelmRelease(charts, ar)
	if err != nil {
		return nil, err
	}
	recs = append(slices.Clone(recs), hr)
	subs, err := a.subscriptions(blobs)
	if err != nil {
		return nil, err
	}
	recs = append(recs, subs)
	wrecs, err := a.workloadReconcilers()
	if err != nil {
		return nil, err
	}
	recs = append(recs, wrecs...)
	join, err := a.memberJoin(ctx)
	if err != nil {
		return nil, err
	}
	if a.runtime, err = reconcilers.New(reconcilers.Config{
		Log: reconcilerLog{a.log, a.door.Reconcilers()}, State: a.store, Reconcilers: recs, Instance: cfg.Instance, Join: join,
		Queue: cfg.Queue, Logger: cfg.Logger, Metrics: reconcilers.NewMetrics(reg), GroupCommit: cfg.SyncAlways && cfg.Log.Sync == nil,
		// The partition consumers deliver only the kinds run here: the
		// events of kinds a controller credential runs (read by its own
		// consumers) or no reconciler runs would each be delivered and
		// acknowledged for nothing (decision 0114).
		OwnKindsOnly: true,
	}); err != nil {
		return nil, err
	}
	if a.controllers, err = a.newControllers(); err != nil {
		return nil, err
	}
	// Kinds a reconciler runs, in this process or as a controller
	// credential names them, are defined by that code until a
	// CustomResourceDefinition defines them.
	kindCheck := gate.NewKindCheck(a.store, a.finalizes)
	if a.gate, err = gate.New(gate.Config{Log: a.log, State: a.store, Finalizes: a.finalizes, Controller: a.controllerOf, Admit: kindCheck.Admit, Sealer: a.seal, AtomicGroups: atomicGroups(cfg), Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if err := a.podServices(a.gate); err != nil {
		return nil, err
	}
	var clusters func() []api.Cluster
	if len(cfg.Clusters) > 0 {
		if a.bridge, err = kube.New(kube.Config{Clusters: cfg.Clusters, Log: a.log, State: a.store, Logger: cfg.Logger, Admit: a.admitObserved}); err != nil {
			return nil, err
		}
		clusters = a.clusters
		registerBridgeMetrics(reg, a.bridge)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jetplane_projection_sequence", Help: "Log sequence the projection has folded.",
	}, func() float64 { return float64(a.store.Seq()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jetplane_reconcile_partitions_held", Help: "Partitions of the key space this instance runs reconcilers for.",
	}, func() float64 { return float64(len(a.runtime.Partitions())) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jetplane_projection_objects", Help: "Objects in current state.",
	}, func() float64 { return float64(a.store.Len()) }))
	if a.api, err = api.New(api.Config{Sealer: a.seal, Limits: cfg.APILimits,
		Gate: a.gate, Store: a.store, Charts: charts, Backup: a.backup, Log: a.log, Blobs: blobs, Ready: a.ready, Clusters: clusters, NextRun: a.runtime.NextRun,
		Tokens: cfg.Tokens, Principals: cfg.Principals, Registerer: reg, Gatherer: reg, Logger: cfg.Logger, Pods: a.pods,
		Reconciler: a.reconcilerOf, Defined: kindCheck.Catalog, Version: a.version(), Console: console.Handler(), Partitions: a.log.PartitionHolders,
		Integrity: a.integrityAPI(), ControllerToken: a.controllerToken(),
	}); err != nil {
		return nil, err
	}
	if err := a.mountKubernetes(kindCheck.Catalog, blobs); err != nil {
		return nil, err
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, errors.New("api tls: give both --tls-cert and --tls-key")
	}
	if cfg.TLSCertFile != "" {
		// Load now, so a bad file stops the start rather than the first request.
		if _, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("api tls: %w", err)
		}
	}
	if a.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen %s: %w; choose another address with --listen", cfg.Listen, err)
	}
	return a, nil
}

// openLog opens the log and the snapshot bucket, waiting up to two minutes
// for JetStream to place them: the nodes of a new cluster start one by one,
// and until enough of them have joined there is no leader or no room for
// replicas.
func openLog(ctx context.Context, nc *nats.Conn, cfg events.Config, logger *slog.Logger) (*events.Log, *events.Blobs, error) {
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var (
		l     *events.Log
		blobs *events.Blobs
	)
	err := retry.Do(wait, retry.Constant(500*time.Millisecond), func(attempt int, err error, _ time.Duration) {
		if retry.Often(attempt) {
			logger.Info("waiting for JetStream to place the log", "err", err)
		}
	}, func(int) (err error) {
		// A request made before the cluster has a metadata leader is never
		// answered; short attempts retry soon after one is elected.
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if l, err = events.Open(octx, nc, cfg); err == nil {
			blobs, err = l.Blobs(octx, events.SnapshotBucket)
		}
		if errors.Is(err, events.ErrNotAppendOnly) {
			// Waiting will not fix it; the operator must.
			return retry.Permanent(err)
		}
		return err
	})
	return l, blobs, err
}

// memberJoin joins the instances through a connection of its own, so that
// heartbeats and the lease never wait behind API reads (decision 0041).
func (a *App) memberJoin(ctx context.Context) (reconcilers.JoinFunc, error) {
	var err error
	if a.srv != nil {
		a.memberNC, err = a.srv.Connect("jetplane-members")
	} else {
		o := a.cfg.NATS
		o.Name += "-members"
		a.memberNC, err = events.Connect(o)
	}
	if err != nil {
		return nil, fmt.Errorf("members connection: %w", err)
	}
	ml, err := a.log.OnConn(ctx, a.memberNC)
	if err != nil {
		return nil, fmt.Errorf("members connection: %w", err)
	}
	return func(ctx context.Context, instance string, opts events.MemberOptions) (reconcilers.Members, error) {
		m, err := ml.Join(ctx, instance, opts)
		if err != nil {
			return nil, err
		}
		a.members.Store(m)
		return m, nil
	}, nil
}

// Lease is this instance's membership lease: until when it holds its
// partitions, and a channel closed once it lost them (events.Members).
// lost is nil before the instance joined.
func (a *App) Lease() (until time.Time, lost <-chan struct{}) {
	m := a.members.Load()
	if m == nil {
		return time.Time{}, nil
	}
	return m.Lease()
}

func (a *App) ready() error {
	if !a.nc.IsConnected() {
		return errors.New("not connected to nats")
	}
	if a.srv != nil {
		// The log cannot be written (a full disk): not ready until it
		// can, which the embedded server sees to once there is room.
		if err := a.srv.StoreError(); err != nil {
			return err
		}
		// A damaged log takes no writes until it is restored.
		if err := a.integrityErr(); err != nil {
			return err
		}
	}
	if !a.projector.Ready() {
		return errors.New("projection still catching up with the log")
	}
	if err := a.restoredFolded(); err != nil {
		return err
	}
	if a.bridge != nil {
		if err := a.bridge.Ready(); err != nil {
			return fmt.Errorf("kubernetes: %w", err)
		}
	}
	return nil
}

// ClusterConfig returns a fresh client config of a configured Kubernetes
// cluster, for parts that talk to the clusters the bridge watches.
func (a *App) ClusterConfig(name string) (*rest.Config, error) {
	return a.cfg.Clusters.RESTConfig(name)
}

// Clusters reports the Kubernetes clusters the bridge watches, in
// configured order (none without clusters).
func (a *App) Clusters() []kube.Status {
	if a.bridge == nil {
		return nil
	}
	return a.bridge.Status()
}

func (a *App) clusters() []api.Cluster {
	sts := a.bridge.Status()
	out := make([]api.Cluster, len(sts))
	for i, s := range sts {
		c := api.Cluster{
			Name: s.Name, State: string(s.State), Synced: s.Synced, Objects: s.Objects, LastError: s.LastError,
			Appended: s.Appended, Duplicates: s.Duplicates, Dropped: s.Dropped, Relists: s.Relists, Gone: s.Gone, Queue: s.Queue,
			Resources: make([]api.ClusterResource, len(s.Resources)),
		}
		if !s.LastEvent.IsZero() {
			c.LastEventTime = &s.LastEvent
		}
		if !s.LastErrorTime.IsZero() {
			c.LastErrorTime = &s.LastErrorTime
		}
		for j, r := range s.Resources {
			c.Resources[j] = api.ClusterResource{Resource: r.Resource, Kind: r.Kind, Synced: r.Synced, Objects: r.Objects}
		}
		out[i] = c
	}
	return out
}

// registerBridgeMetrics exposes each cluster's bridge in /metrics.
func registerBridgeMetrics(reg prometheus.Registerer, b *kube.Bridge) {
	for i, s := range b.Status() {
		status := func() kube.Status { return b.Status()[i] }
		labels := prometheus.Labels{"cluster": s.Name}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "jetplane_bridge_events_appended_total", Help: "Events of a Kubernetes cluster stored in the log.", ConstLabels: labels,
			}, func() float64 { return float64(status().Appended) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "jetplane_bridge_events_duplicate_total", Help: "Events of a Kubernetes cluster the log already held (stored by another bridge).", ConstLabels: labels,
			}, func() float64 { return float64(status().Duplicates) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "jetplane_bridge_relists_total", Help: "Full relists of a Kubernetes cluster's resources after the first.", ConstLabels: labels,
			}, func() float64 { return float64(status().Relists) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "jetplane_bridge_queue", Help: "Events of a Kubernetes cluster waiting to be appended.", ConstLabels: labels,
			}, func() float64 { return float64(status().Queue) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "jetplane_bridge_up", Help: "1 when a Kubernetes cluster is synced and its watches and appends succeed.", ConstLabels: labels,
			}, func() float64 {
				if status().State == kube.StateSynced {
					return 1
				}
				return 0
			}),
		)
	}
}

// URL is the API's base URL.
func (a *App) URL() string {
	if a.cfg.TLSCertFile != "" {
		return "https://" + a.listener.Addr().String()
	}
	return "http://" + a.listener.Addr().String()
}

// NATSURL is the URL outside clients reach the embedded NATS server on
// ("" with an outside NATS).
func (a *App) NATSURL() string {
	if a.srv == nil {
		return ""
	}
	return a.srv.ClientURL()
}

// Creds is the embedded NATS server's credentials store (nil with an
// outside NATS).
func (a *App) Creds() *auth.Store {
	if a.srv == nil {
		return nil
	}
	return a.srv.Creds()
}

// Store is the live projection.
func (a *App) Store() *projections.Store { return a.store }

// Log is the event log.
func (a *App) Log() *events.Log { return a.log }

// Door is the gate's way in for statuses, finalizations, evictions and
// bindings: what the node agents, the reconcilers and the scheduler of
// this instance append through.
func (a *App) Door() *gate.Door { return a.door }

// Partitions lists the partitions this instance runs reconcilers for.
func (a *App) Partitions() []int { return a.runtime.Partitions() }

// Handler is the API's HTTP handler.
func (a *App) Handler() http.Handler { return a.api }

// Run serves until ctx ends, or until a part stops on its own (that
// part's error is returned). Then it shuts down, each part on its own
// context, in order: the API stops taking requests and finishes those in
// flight (up to 10 s); the bridge appends what it has queued; the
// reconciler runtime stops taking work, finishes its runs in flight (up
// to its grace period) and releases its partitions; then the projection
// those runs read stops, a snapshot is saved and NATS stops.
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	pctx, stopProjector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopProjector()
	projDone := make(chan error, 1)
	go func() { projDone <- a.projector.Start(pctx) }()

	rctx, stopRuntime := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuntime()
	rtDone := make(chan error, 1)
	go func() { rtDone <- a.runtime.Start(rctx) }()
	podsDone := a.runPods(rctx)
	if a.srv != nil {
		// Outside credentials' consumers stay within their limit
		// (decision 0040).
		go func() {
			for {
				err := auth.Guard(rctx, auth.GuardConfig{Store: a.srv.Creds(), Conn: a.nc, Logger: a.cfg.Logger})
				if rctx.Err() != nil {
					return
				}
				a.cfg.Logger.Error("consumer guard stopped; starting it again in 5 s", "err", err)
				if !retry.Sleep(rctx, 5*time.Second) {
					return
				}
			}
		}()
	}
	a.serveControllers(rctx)
	ictx, stopIntegrity := context.WithCancel(context.WithoutCancel(ctx))
	defer stopIntegrity()
	integrityDone := a.runIntegrity(ictx)

	bctx, stopBridge := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBridge()
	bridgeDone := make(chan error, 1)
	var bridgeStopped <-chan error // nil without a bridge: never selected
	if a.bridge != nil {
		go func() { bridgeDone <- a.bridge.Start(bctx) }()
		bridgeStopped = bridgeDone
	} else {
		bridgeDone <- nil
	}

	httpSrv := &http.Server{Handler: a.api}
	a.api.ConfigureServer(httpSrv)
	httpDone := make(chan error, 1)
	go func() {
		if a.cfg.TLSCertFile != "" {
			httpDone <- httpSrv.ServeTLS(a.listener, a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
			return
		}
		httpDone <- httpSrv.Serve(a.listener)
	}()
	a.cfg.Logger.Info("api listening", "url", a.URL())

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-projDone:
		runErr = fmt.Errorf("projection stopped: %w", err)
		projDone <- err
	case err := <-httpDone:
		runErr = fmt.Errorf("api stopped: %w", err)
	case err := <-rtDone:
		runErr = fmt.Errorf("reconcilers stopped: %w", err)
		rtDone <- err
	case err := <-bridgeStopped:
		if err == nil {
			err = errors.New("it returned")
		}
		runErr = fmt.Errorf("kubernetes bridge stopped: %w", err)
		bridgeDone <- err
	}
	a.cfg.Logger.Info("shutting down")
	// From now on the runtime claims no partition: one taken now would
	// only be released again, or left claimed if the cluster goes away.
	a.runtime.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(sctx)
	stopBridge()
	<-bridgeDone
	stopRuntime()
	<-rtDone
	<-podsDone
	// Only now: runs in flight read the projection until they end.
	a.cfg.Logger.Info("stopping the projection")
	stopProjector()
	<-projDone
	stopIntegrity()
	<-integrityDone
	if a.projector.Ready() {
		snap, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.projector.SaveSnapshot(snap); err != nil {
			a.cfg.Logger.Warn("final snapshot failed", "err", err)
		}
	}
	return runErr
}

func (a *App) close() {
	if a.stopKeys != nil {
		a.stopKeys()
	}
	if a.listener != nil {
		a.listener.Close()
	}
	if a.nc != nil {
		a.nc.Close()
	}
	if a.memberNC != nil {
		a.memberNC.Close()
	}
	if a.srv != nil {
		a.srv.Shutdown()
	}
	if a.monitor != nil {
		// The files are complete now: sign where the log ends.
		a.monitor.Close()
	}
}
