package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/jetplane/jetplane/internal/retry"
	"github.com/jetplane/jetplane/projections"
)

// cluster is the bridge of one cluster: an informer per resource, a queue
// and its writer.
type cluster struct {
	cfg    Cluster
	bridge *Config
	name   string
	logger *slog.Logger
	track  *tracker

	mu        sync.Mutex
	resources []*resource // set once discovery resolved them
	queue     chan item
	// stopping is closed when the bridge stops: handlers waiting on a full
	// queue give up.
	stopping chan struct{}
}

// resource is one watched resource and its informer.
type resource struct {
	cfg        Resource
	selector   labels.Selector
	kind       string // kind with group, as keys name it
	namespaced bool
	informer   cache.SharedIndexInformer
	reg        cache.ResourceEventHandlerRegistration
	lists      atomic.Uint64 // full lists, the first included
}

func newCluster(c Cluster, bcfg *Config) *cluster {
	return &cluster{
		cfg:      c,
		bridge:   bcfg,
		name:     c.Name,
		logger:   bcfg.Logger.With("cluster", c.Name),
		track:    &tracker{now: bcfg.Now},
		queue:    make(chan item, bcfg.QueueSize),
		stopping: make(chan struct{}),
	}
}

func (c *cluster) status() Status {
	s := Status{Name: c.name, Queue: len(c.queue)}
	c.track.fill(&s)
	c.mu.Lock()
	rs := c.resources
	c.mu.Unlock()
	if rs == nil {
		for _, r := range c.cfg.Resources {
			s.Resources = append(s.Resources, ResourceStatus{Resource: r.String()})
		}
		return s
	}
	for _, r := range rs {
		n := len(r.informer.GetStore().ListKeys())
		s.Objects += n
		s.Resources = append(s.Resources, ResourceStatus{Resource: r.cfg.String(), Kind: r.kind, Synced: r.reg.HasSynced(), Objects: n})
		if l := r.lists.Load(); l > 1 {
			s.Relists += l - 1
		}
	}
	return s
}

// run bridges the cluster until ctx ends.
func (c *cluster) run(ctx context.Context) {
	wctx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWriter()
	w := &writer{log: c.bridge.Log, queue: c.queue, status: c.track, logger: c.logger,
		maxBatch: c.bridge.MaxBatch, retry: 100 * time.Millisecond, maxRetry: 5 * time.Second}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		w.run(wctx)
	}()

	// Stop: handlers stop waiting for room in the queue, informers (and
	// so handlers) end, then the writer drains what is queued, for a
	// bounded time.
	stop := context.AfterFunc(ctx, func() { close(c.stopping) })
	var informers sync.WaitGroup
	c.watch(ctx, &informers)
	if stop() {
		close(c.stopping) // watch returned before ctx ended: not expected
	}
	<-c.stopping
	informers.Wait()
	close(c.queue)
	drain := time.AfterFunc(c.bridge.DrainTimeout, stopWriter)
	defer drain.Stop()
	<-writerDone
	if n := len(c.queue); n > 0 {
		c.logger.Warn("stopped with observed changes not appended; the next start relists them", "events", n)
	}
}

// watch connects, starts the informers, syncs, and returns when ctx ends.
// Informers it started are counted in informers.
func (c *cluster) watch(ctx context.Context, informers *sync.WaitGroup) {
	// A kubeconfig that loaded at start may have gone; keep trying.
	var rc *rest.Config
	err := retry.Do(ctx, retry.Constant(30*time.Second), func(_ int, err error, _ time.Duration) {
		c.failed(fmt.Errorf("client config: %w", err), true)
	}, func(int) (err error) {
		rc, err = c.cfg.RESTConfig()
		return err
	})
	if err != nil {
		return
	}
	rc.UserAgent = "jetplane-bridge/" + c.name
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		c.failed(fmt.Errorf("client: %w", err), true)
		<-ctx.Done()
		return
	}
	resources, ok := c.discover(ctx, rc)
	if !ok {
		return
	}
	// Skipping changes current state already holds, and finding objects
	// that are gone, both need current state as of now.
	if !c.waitForState(ctx) {
		return
	}
	for _, r := range resources {
		if err := c.startInformer(ctx, dyn, r, informers); err != nil {
			c.failed(err, true)
			<-ctx.Done()
			return
		}
	}
	c.mu.Lock()
	c.resources = resources
	c.mu.Unlock()

	synced := make([]cache.InformerSynced, len(resources))
	for i, r := range resources {
		synced[i] = r.reg.HasSynced
	}
	// Informers relist and rewatch on their own (after 410 Gone, after an
	// apiserver restart); the first sync is waited for once.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	for _, r := range resources {
		c.finalizeGone(r)
	}
	barrier := make(chan struct{})
	if !c.enqueue(item{barrier: barrier}) {
		return
	}
	select {
	case <-barrier:
	case <-ctx.Done():
		return
	}
	c.track.setSynced()
	c.logger.Info("cluster synced", "objects", c.status().Objects)
	<-ctx.Done()
}

// discover resolves each resource's kind and scope, retrying until the
// cluster answers for all of them or ctx ends.
func (c *cluster) discover(ctx context.Context, rc *rest.Config) ([]*resource, bool) {
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		c.failed(fmt.Errorf("discovery client: %w", err), true)
		<-ctx.Done()
		return nil, false
	}
	var out []*resource
	err = retry.Do(ctx, retry.Backoff{First: time.Second, Max: 30 * time.Second}, func(_ int, err error, _ time.Duration) {
		c.failed(err, true)
	}, func(int) (err error) {
		out, err = c.resolve(ctx, disc.RESTClient())
		return err
	})
	if err != nil {
		return nil, false
	}
	c.track.watchOK()
	return out, true
}

// resolve asks the cluster for each resource's kind and scope. It reads
// the API resource lists itself, as the discovery client does, but with a
// context, so that a stopping bridge does not wait on an unreachable host.
func (c *cluster) resolve(ctx context.Context, client rest.Interface) ([]*resource, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []*resource
	for _, rc := range c.cfg.Resources {
		gv := rc.GVR().GroupVersion()
		path := "/apis/" + gv.String()
		if gv.Group == "" {
			path = "/api/" + gv.Version
		}
		var list metav1.APIResourceList
		err := client.Get().AbsPath(path).Do(ctx).Into(&list)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: the cluster does not serve API %s", rc, gv)
		}
		if err != nil {
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		}
		r := &resource{cfg: rc, selector: labels.Everything()}
		if rc.LabelSelector != "" {
			// Validated with the configuration.
			r.selector, _ = labels.Parse(rc.LabelSelector)
		}
		for _, ar := range list.APIResources {
			if ar.Name == rc.Resource {
				r.kind, r.namespaced = kindName(ar.Kind, rc.Group), ar.Namespaced
				break
			}
		}
		switch {
		case r.kind == "":
			return nil, fmt.Errorf("%s: API %s has no resource %q; kubectl api-resources lists what the cluster serves", rc, gv, rc.Resource)
		case !r.namespaced && rc.Namespace != "":
			return nil, fmt.Errorf("%s: %s is cluster-scoped; remove its namespace", rc, rc.Resource)
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *cluster) waitForState(ctx context.Context) bool {
	err := retry.Do(ctx, retry.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}, func(_ int, err error, _ time.Duration) {
		c.logger.Warn("waiting for the log", "err", err)
	}, func(int) error {
		head, err := c.bridge.Log.LastSequence(ctx)
		if err == nil {
			err = c.bridge.State.WaitFor(ctx, head)
		}
		return err
	})
	return err == nil
}

// startInformer builds r's informer on the dynamic client and starts it.
// The list-watch is dynamicinformer's, with the calls observed: their
// errors are the cluster's status, and their count shows relists.
func (c *cluster) startInformer(ctx context.Context, dyn dynamic.Interface, r *resource, informers *sync.WaitGroup) error {
	ri := dyn.Resource(r.cfg.GVR()).Namespace(r.cfg.Namespace)
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = r.cfg.LabelSelector }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			l, err := ri.List(ctx, o)
			c.observe(ctx, err)
			if err == nil && o.Continue == "" {
				r.lists.Add(1)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			w, err := ri.Watch(ctx, o)
			c.observe(ctx, err)
			if err != nil {
				return nil, err
			}
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				r.lists.Add(1) // a streamed list
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error {
					c.observe(ctx, apierrors.FromObject(e.Object))
				}
				return e, true
			}), nil
		},
	}
	r.informer = cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(lw, dyn),
		&unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ObjectDescription: r.cfg.String()},
	)
	// managedFields is never recorded; not caching it halves the memory
	// of a typical object.
	if err := r.informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		return err
	}
	if err := r.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		// List and watch calls were observed already; this also sees
		// errors within a stream. A 410 was counted by the call.
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			c.observe(ctx, err)
		}
	}); err != nil {
		return err
	}
	reg, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.observed,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := cur.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() && o.GetUID() == n.GetUID() {
				return // a relist's unchanged object
			}
			c.observed(cur)
		},
		DeleteFunc: c.deleted,
	})
	if err != nil {
		return err
	}
	r.reg = reg
	informers.Go(func() { r.informer.RunWithContext(ctx) })
	return nil
}

// observe records the outcome of a list or watch call.
func (c *cluster) observe(ctx context.Context, err error) {
	switch {
	case err == nil:
		if c.track.watchOK() {
			c.logger.Info("cluster reachable again")
		}
	case isShutdown(ctx, err):
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		// The watch fell too far behind (etcd compacted, or the
		// apiserver's watch cache restarted): the informer relists,
		// and deletes it missed come out as DeletedFinalStateUnknown.
		c.track.sawGone()
		c.logger.Info("watch expired; relisting", "err", err)
	default:
		c.failed(err, true)
	}
}

func (c *cluster) failed(err error, watchSide bool) {
	if c.track.failed(err, watchSide) {
		c.logger.Warn("cluster unreachable or failing; retrying", "err", err)
	}
}

// observed handles an added or updated object.
func (c *cluster) observed(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if alreadyHeld(c.bridge.State.GetRecord(KeyOf(c.name, u)), u) {
		return
	}
	ev, err := observedEvent(c.name, u, c.bridge.Now())
	if err != nil {
		c.track.dropped(err)
		c.logger.Error("cannot record observed object", "err", err)
		return
	}
	c.enqueue(item{ev: ev})
}

// deleted handles a deleted object: the watch's delete, or an object a
// relist found gone (its last known state).
func (c *cluster) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.enqueue(item{ev: deletedEvent(c.name, u, c.bridge.Now())})
}

// finalizeGone records as gone every object current state holds for r's
// scope that r's synced cache does not: deleted while no bridge watched.
func (c *cluster) finalizeGone(r *resource) {
	q := projections.Query{Kind: r.kind, NamespacePrefix: c.name + "/"}
	if r.cfg.Namespace != "" {
		q = projections.Query{Kind: r.kind, Namespace: c.name + "/" + r.cfg.Namespace}
	}
	keys, _ := c.bridge.State.Keys(q)
	store := r.informer.GetStore()
	gone := 0
	for _, k := range keys {
		if k.Kind != r.kind { // a bare kind also matches other groups
			continue
		}
		rec := c.bridge.State.GetRecord(k)
		if rec == nil || !r.selector.Matches(labels.Set(rec.GetMetadata().GetLabels())) {
			continue
		}
		ns := strings.TrimPrefix(k.Namespace, c.name+"/")
		cacheKey := k.Name
		if ns != "" {
			cacheKey = ns + "/" + k.Name
		}
		if _, exists, _ := store.GetByKey(cacheKey); exists {
			continue
		}
		if c.enqueue(item{ev: goneEvent(c.name, k, rec, c.bridge.Now())}) {
			gone++
		}
	}
	if gone > 0 {
		c.logger.Info("objects deleted while the bridge was away", "resource", r.cfg.String(), "objects", gone)
	}
}

// enqueue waits for room in the queue; false when the bridge is stopping.
// An event the gate does not admit is dropped (and counted).
func (c *cluster) enqueue(it item) bool {
	if it.ev != nil && c.bridge.Admit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.bridge.Admit(ctx, it.ev)
		cancel()
		if err != nil {
			c.track.dropped(err)
			c.logger.Error("observed change not admitted by the gate; not recorded", "key", it.ev.GetKey().String(), "err", err)
			return true
		}
	}
	select {
	case c.queue <- it:
		return true
	case <-c.stopping:
		return false
	}
}
