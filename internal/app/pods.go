package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/node"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/scheduler/wasm"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// PodsConfig configures the Pod and Node kinds and the local node agent.
type PodsConfig struct {
	// Agent runs a node agent in this process when Agent.Node is set
	// (`jetplane serve` sets it unless --node=false). Conn is filled in;
	// Dir defaults to <data>-node, beside the data directory and outside
	// it (what pods write never lives among the instance's keys).
	Agent pod.AgentConfig
	// Scheduler places unbound pods; nil is the built-in one (package
	// scheduler).
	Scheduler pod.Scheduler
	// SchedulerConfig is the built-in scheduler's config file (YAML, the
	// profiles by schedulerName, their plugins, weights and args, including
	// WebAssembly plugins from a file or the image store); empty runs the
	// default profile.
	SchedulerConfig string
	// NodeGrace and NodeEviction: NotReady after a heartbeat is missing
	// this long, pods NodeLost after NotReady this long (40 s, 5 min).
	NodeGrace, NodeEviction time.Duration
	// MaxImageBytes bounds a pushed module (default 64 MiB).
	MaxImageBytes int64
}

// pods is the Pod and Node machinery of an instance.
type pods struct {
	nodes     *events.NodeStore
	status    *pod.StatusService
	registrar *node.Registrar
	agent     *pod.Agent // nil without a local agent
	// sched runs the scheduler's own loop, when it has one.
	sched interface {
		Start(ctx context.Context) error
	}
	store    *projections.Store
	maxImage int64
}

// podReconcilers opens the node buckets and builds the Pod and Node
// reconcilers.
func (a *App) podReconcilers(ctx context.Context) ([]reconcilers.Reconciler, error) {
	// Like the log itself, the buckets wait for JetStream to place them:
	// the nodes of a new cluster start one by one.
	var nodes *events.NodeStore
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		nodes, err = a.log.NodeStore(octx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		if attempt == 1 || attempt%10 == 0 {
			a.cfg.Logger.Info("waiting for JetStream to place the node buckets", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	// A module that does not compile is refused at push, not found out
	// on every node that pulls it.
	nodes.Images().SetModuleCheck(pod.CheckModule)
	a.pods = &pods{nodes: nodes, status: &pod.StatusService{Log: a.log, State: a.store, Door: a.nodeDoor}, store: a.store, maxImage: a.cfg.Pods.MaxImageBytes}
	if a.pods.maxImage <= 0 {
		a.pods.maxImage = events.DefaultMaxImageBytes
	}
	sched := a.cfg.Pods.Scheduler
	// The pod reconciler hands each pod the built-in scheduler binds to
	// its node at once (pod.Reconciler.Bound).
	var pr *pod.Reconciler
	if sched == nil {
		opts := scheduler.Options{Log: a.door.As(gate.Principal{Name: "scheduler", Role: gate.RoleScheduler}), State: a.store, Instance: a.cfg.Instance, Logger: a.cfg.Logger,
			Bound: func(p *schemas.Object) { pr.Bound(p) }}
		if path := a.cfg.Pods.SchedulerConfig; path != "" {
			cfg, err := scheduler.LoadConfig(path)
			if err != nil {
				return nil, fmt.Errorf("--scheduler-config: %w", err)
			}
			if opts.Profiles, err = cfg.Build(wasm.RegistryWithImages(nodes.Images())); err != nil {
				return nil, fmt.Errorf("--scheduler-config %s: %w", path, err)
			}
		}
		s, err := scheduler.New(opts)
		if err != nil {
			return nil, err
		}
		sched = s
	}
	if st, ok := sched.(interface {
		Start(ctx context.Context) error
	}); ok {
		a.pods.sched = st
	}
	pr, err := pod.NewReconciler(pod.Config{State: clearSecrets{a.store, a.seal}, Work: nodes, Scheduler: sched, SealKeys: pod.HeartbeatKeys{Heartbeats: nodes}})
	if err != nil {
		return nil, err
	}
	ncfg := node.Config{Heartbeats: nodes, State: a.store, Log: a.log, Door: a.nodeControllerDoor, Grace: a.cfg.Pods.NodeGrace, Eviction: a.cfg.Pods.NodeEviction, Logger: a.cfg.Logger}
	nr, err := node.NewReconciler(ncfg)
	if err != nil {
		return nil, err
	}
	return []reconcilers.Reconciler{pr, nr}, nil
}

// podServices builds what needs the gate: the registrar, and the local
// agent.
func (a *App) podServices(g *gate.Gate) error {
	ncfg := node.Config{Heartbeats: a.pods.nodes, State: a.store, Log: a.log, Logger: a.cfg.Logger}
	var err error
	a.pods.registrar, err = node.NewRegistrar(ncfg, func(ctx context.Context, obj *schemas.Object) error {
		// The registrar applies only the Node its heartbeat's key names,
		// a key only that node's credential may write: the node speaks
		// for itself, and Authorize holds it to its own Node.
		name := obj.GetMetadata().GetName()
		_, err := g.Apply(ctx, gate.Principal{Name: "node/" + name, Role: gate.RoleNode, Self: name}, []*schemas.Object{obj}, "")
		return err
	})
	if err != nil {
		return err
	}
	if ac := a.cfg.Pods.Agent; ac.Node != "" {
		if ac.Dir == "" {
			if a.cfg.DataDir == "" {
				return errors.New("node agent: give it a directory (there is no data dir)")
			}
			ac.Dir = NodeDir(a.cfg.DataDir)
		}
		if ac.Logger == nil {
			ac.Logger = a.cfg.Logger
		}
		octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if ac.Conn, err = events.OpenNode(octx, a.nc, ac.Node); err != nil {
			return err
		}
		if a.pods.agent, err = pod.NewAgent(ac); err != nil {
			return fmt.Errorf("node agent: %w", err)
		}
	}
	return nil
}

// NodeDir is the local node agent's default directory for the data
// directory dataDir: its sibling, <data>-node.
func NodeDir(dataDir string) string { return filepath.Clean(dataDir) + "-node" }

// runPods runs the status service, the registrar and the local agent
// until ctx ends.
func (a *App) runPods(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	n := 2
	fin := make(chan struct{}, 4)
	go func() {
		_ = a.pods.nodes.ServeNodeStatus(ctx, func(node string, reports [][]byte) []error {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return a.pods.status.HandleBatch(rctx, node, reports)
		})
		fin <- struct{}{}
	}()
	go func() {
		_ = a.pods.registrar.Start(ctx)
		fin <- struct{}{}
	}()
	if a.pods.sched != nil {
		n++
		go func() {
			if err := a.pods.sched.Start(ctx); err != nil && ctx.Err() == nil {
				a.cfg.Logger.Error("scheduler stopped", "err", err)
			}
			fin <- struct{}{}
		}()
	}
	if a.pods.agent != nil {
		n++
		go func() {
			if err := a.pods.agent.Start(ctx); err != nil && ctx.Err() == nil {
				a.cfg.Logger.Error("node agent stopped", "err", err)
			}
			fin <- struct{}{}
		}()
	}
	go func() {
		for range n {
			<-fin
		}
		close(done)
	}()
	return done
}

// Images is the image store.
func (a *App) Images() *events.Images { return a.pods.nodes.Images() }

// NodeStore is the node agents' buckets and the logs stream.
func (a *App) NodeStore() *events.NodeStore { return a.pods.nodes }

// Images is the image store (api.Pods).
func (p *pods) Images() *events.Images { return p.nodes.Images() }

// ReadLogs reads pods' logs (api.Pods): those the pod's bound node wrote.
// A follow of a pod not bound yet waits until it is.
func (p *pods) ReadLogs(ctx context.Context, q events.LogQuery, fn func(events.LogLine) error) error {
	q.Node = p.boundNode(q.Namespace, q.Pod)
	for q.Follow && q.Node == "" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		q.Node = p.boundNode(q.Namespace, q.Pod)
	}
	return p.nodes.ReadLogs(ctx, q, fn)
}

// NewestLog is the newest chunk of each of a pod's containers (api.Pods).
func (p *pods) NewestLog(ctx context.Context, q events.LogQuery) ([]events.LogLine, error) {
	q.Node = p.boundNode(q.Namespace, q.Pod)
	return p.nodes.NewestLog(ctx, q)
}

// boundNode is the node pod namespace/name is bound to ("" when none):
// the only node whose output is that pod's log.
func (p *pods) boundNode(namespace, name string) string {
	o := p.store.Get(projections.Key{Kind: podspec.KindPod, Namespace: namespace, Name: name})
	return o.GetSpec().GetFields()["nodeName"].GetStringValue()
}

// MaxImageBytes bounds a push (api.Pods).
func (p *pods) MaxImageBytes() int64 { return p.maxImage }

// ImageInUse names the pods (namespace/name) that name the image or run
// its module (api.Pods).
func (p *pods) ImageInUse(ref, digest string) []string {
	all, _ := p.store.List(projections.Query{Kind: podspec.KindPod})
	var out []string
	for _, o := range all {
		if podUses(o, ref, digest) {
			out = append(out, o.GetMetadata().GetNamespace()+"/"+o.GetMetadata().GetName())
		}
	}
	return out
}

func podUses(o *schemas.Object, ref, digest string) bool {
	for _, c := range o.GetSpec().GetFields()["containers"].GetListValue().GetValues() {
		img := c.GetStructValue().GetFields()["image"].GetStringValue()
		if img == ref || strings.HasSuffix(img, "@"+digest) {
			return true
		}
	}
	ps, err := pod.PodStatus(o.GetStatus())
	if err != nil {
		return false
	}
	for _, cs := range ps.ContainerStatuses {
		if cs.ImageID == digest {
			return true
		}
	}
	return false
}

// nodeDoor is how node's status reports are appended: as that node's
// principal, which the gate lets record the status of the pods bound to
// it only.
func (a *App) nodeDoor(node string) pod.StatusAppender {
	return nodeWriter{a.door.As(gate.Principal{Name: "node/" + node, Role: gate.RoleNode, Self: node})}
}

// nodeWriter tells a node that a report the gate refuses is refused for
// good (events.ErrReportRefused): sending it again changes nothing.
type nodeWriter struct{ w *gate.Writer }

func (n nodeWriter) Append(ctx context.Context, e events.Entry) (events.Result, error) {
	res, err := n.w.Append(ctx, e)
	return res, reportRefused(err)
}

func (n nodeWriter) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	res, errs := n.w.AppendAsync(ctx, entries)
	for i, err := range errs {
		errs[i] = reportRefused(err)
	}
	return res, errs
}

func reportRefused(err error) error {
	if errors.Is(err, gate.ErrForbidden) {
		return fmt.Errorf("%w: %v", events.ErrReportRefused, err)
	}
	return err
}

// nodeControllerDoor is how the Node reconciler marks, restores, fails
// and deletes the pods of node: as the controller of that Node, which the
// gate lets write the pods bound to it only.
func (a *App) nodeControllerDoor(name string) node.Appender {
	k := projections.Key{Kind: "Node", Name: name}
	p := gate.Principal{Name: "reconciler/Node", Role: gate.RoleController, Owner: gate.OwnerRef(k)}
	if obj := a.store.Get(k); obj != nil {
		p = gate.Controller(p.Name, obj)
	}
	return a.door.As(p)
}

// reconcilerLog is the log as the reconciler runtime sees it: reads go to
// the log, every append passes the gate's door first, each entry as the
// controller its actor names (gate.Door.Reconcilers).
type reconcilerLog struct {
	*events.Log
	door *gate.Writer
}

func (l reconcilerLog) Append(ctx context.Context, e events.Entry) (events.Result, error) {
	return l.door.Append(ctx, e)
}

func (l reconcilerLog) AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error) {
	return l.door.AppendBatch(ctx, entries)
}

func (l reconcilerLog) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	return l.door.AppendAsync(ctx, entries)
}
