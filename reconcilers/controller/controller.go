// Package controller runs a team's own reconciler in its own process,
// against a jetplane deployment's NATS, with the runtime jetplane's
// built-in kinds run on (package reconcilers): the partitions of its kinds
// spread over its replicas, one run per key at a time across them, backoff
// on errors, periodic resync, dependsOn in both directions, finalization
// on delete, and status written with optimistic concurrency.
//
// A controller connects with a controller credential (`jetplane creds
// create --role controller --kinds Widget.example.com NAME`): it reads the
// log, and writes only the status and finalization of its own kinds,
// through the jetplane instances, which check every write (decision
// 0050). Its replicas share membership among themselves (a bucket of
// their own), so controllers of different kinds scale independently. A
// kind has one controller: the credentials store refuses a second one
// claiming it (decision 0049).
//
//	type widgets struct{}
//
//	func (widgets) Kinds() []string { return []string{"Widget.example.com"} }
//	func (widgets) Reconcile(ctx context.Context, obj *schemas.Object) (controller.Status, time.Duration, error) {
//		// ... drive the world towards obj.Spec ...
//		return controller.Status{Message: "made"}, 10 * time.Minute, nil
//	}
//	func (widgets) Delete(ctx context.Context, obj *schemas.Object) error { return nil }
//
//	err := controller.Run(ctx, controller.Config{NATS: url, Creds: "widgets.creds"}, widgets{})
package controller

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// Controller is a team's reconciler of its kinds.
type Controller interface {
	// Kinds lists the kinds it runs, as keys name them
	// (Widget.example.com); its credential must name the same ones.
	Kinds() []string
	// Reconcile drives the world towards obj, the latest state of an
	// object that exists (never the event that woke it), and returns the
	// status to record and how long until it must run again at the
	// latest (0: when the object or a dependency changes, or at the
	// periodic resync). An error is recorded and retried with backoff;
	// one made with Terminal is not retried until the object changes.
	Reconcile(ctx context.Context, obj *schemas.Object) (Status, time.Duration, error)
	// Delete cleans up after obj, whose deletion was requested, once the
	// objects depending on it are gone; when it returns nil the object
	// leaves current state. An error retries with backoff.
	Delete(ctx context.Context, obj *schemas.Object) error
}

// Status is what a run records in the object's status; a Ready condition
// is added (True after a successful Reconcile, False after an error).
type Status struct {
	// Phase defaults to Ready.
	Phase   string
	Message string
	// Fields are the kind's own status fields, recorded as status.details
	// (values as structpb.NewValue takes them).
	Fields map[string]any
}

// Terminal marks err as not worth retrying until the object changes.
func Terminal(err error) error { return reconcilers.Terminal(err) }

// Config says where and as whom a controller runs.
type Config struct {
	// NATS is the deployment's NATS URLs, comma-separated.
	NATS string
	// Creds is the controller credential's file; its name is the
	// controller's.
	Creds string
	// CAFile, CertFile and KeyFile configure TLS to NATS.
	CAFile, CertFile, KeyFile string
	// Instance names this replica (default host-pid); history shows its
	// writes as reconciler/KIND@NAME/INSTANCE.
	Instance string
	// Queue tunes runs: how many at once, backoff, resync.
	Queue queue.Config
	// Grace bounds how long runs in flight may take at shutdown.
	Grace time.Duration
	// Members tunes how fast a dead replica's partitions move.
	Members events.MemberOptions
	Logger  *slog.Logger
}

// Run runs c until ctx ends: it connects, folds the log into its own
// projection, joins the controller's other replicas and runs the keys of
// the partitions it is given. On shutdown it finishes runs in flight (up
// to Grace) and hands its partitions to the others.
func Run(ctx context.Context, cfg Config, c Controller) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	name, err := credName(cfg.Creds)
	if err != nil {
		return err
	}
	if len(c.Kinds()) == 0 {
		return errors.New("controller: Kinds is empty; list the kinds it runs")
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	nc, err := events.Connect(events.ConnectOptions{URLs: cfg.NATS, Name: "controller " + name, CredsFile: cfg.Creds,
		CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile})
	if err != nil {
		return err
	}
	defer nc.Close()
	log, err := events.OpenController(ctx, nc, name)
	if err != nil {
		return err
	}
	store := projections.NewStore(projections.StoreOptions{})
	proj, err := projections.NewProjector(projections.ProjectorConfig{Log: log, Store: store, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	consumer, earlier, err := consumerPrefix(cfg.Creds, name)
	if err != nil {
		return err
	}
	if earlier == nil {
		cfg.Logger.Warn("controller credential issued before consumer tags: another credential could find and read this controller's consumers on the log; issue it again (jetplane creds revoke "+name+", then jetplane creds create --role controller --kinds ... "+name+")",
			"controller", name, "creds", cfg.Creds)
	}
	rt, err := reconcilers.New(reconcilers.Config{
		Log: log, State: store, Reconcilers: []reconcilers.Reconciler{adapter{c}},
		Instance: name + "/" + cfg.Instance, Consumer: consumer, Earlier: earlier, OwnKindsOnly: true,
		Queue: cfg.Queue, Grace: cfg.Grace, Members: cfg.Members, Logger: cfg.Logger.With("controller", name),
	})
	if err != nil {
		return err
	}
	pctx, stopProj := context.WithCancel(context.WithoutCancel(ctx))
	defer stopProj()
	projDone := make(chan error, 1)
	go func() { projDone <- proj.Start(pctx) }()
	rtDone := make(chan error, 1)
	go func() { rtDone <- rt.Start(ctx) }()
	select {
	case err := <-rtDone:
		stopProj()
		<-projDone
		if ctx.Err() != nil {
			return nil
		}
		return err
	case err := <-projDone:
		rt.Drain()
		<-rtDone
		return fmt.Errorf("controller: projection stopped: %w", err)
	}
}

// credName reads the controller's name from its creds file's comment
// ("# jetplane NATS credential: role controller, name NAME").
func credName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("controller credential: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# jetplane NATS credential: role ")
		if !ok {
			continue
		}
		role, name, _ := strings.Cut(rest, ", name ")
		if role != "controller" {
			return "", fmt.Errorf("controller credential %s: role %s; make one with jetplane creds create --role controller --kinds KIND NAME", path, role)
		}
		return strings.TrimSpace(name), nil
	}
	return "", fmt.Errorf("controller credential %s: not a file of jetplane creds create --role controller", path)
}

// consumerPrefix is the prefix of the controller's partition consumers,
// as its creds file says (decision 0122), and the earlier prefix whose
// consumers they replace; a file of a credential issued before consumer
// tags says none, and its consumers keep their earlier names (earlier is
// nil then).
func consumerPrefix(path, name string) (prefix string, earlier []string, err error) {
	p, err := events.CredsConsumerPrefix(path)
	if err != nil {
		return "", nil, fmt.Errorf("controller credential: %w", err)
	}
	legacy := events.ControllerConsumers(name, "")
	if p == "" {
		return legacy, nil, nil
	}
	if !strings.HasPrefix(p, legacy+"_") {
		return "", nil, fmt.Errorf("controller credential %s: consumer prefix %q is not controller %s's; make one with jetplane creds create --role controller --kinds KIND NAME", path, p, name)
	}
	return p, []string{legacy}, nil
}

// adapter runs a Controller as a reconcilers.Reconciler.
type adapter struct{ c Controller }

func (a adapter) Kinds() []string { return a.c.Kinds() }

func (a adapter) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	st, next, err := a.c.Reconcile(ctx, obj)
	res := reconcilers.Result{RequeueAfter: next, Phase: st.Phase, Message: st.Message}
	if st.Fields != nil {
		d, derr := structpb.NewStruct(st.Fields)
		if derr != nil && err == nil {
			err = reconcilers.Terminal(fmt.Errorf("status fields: %w", derr))
		}
		res.Details = d
	}
	return res, err
}

func (a adapter) Finalize(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{}, a.c.Delete(ctx, obj)
}
