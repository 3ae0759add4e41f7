package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
)

// sealer opens the key file for sealing Secrets; the data key bucket is
// opened on first use, so a deployment without Secrets never creates it
// and a cluster still placing its streams does not hold up the start.
func (a *App) sealer(context.Context) (*seal.Sealer, error) {
	path := a.cfg.EncryptionKeyFile
	if path == "" {
		if a.srv == nil {
			a.cfg.Logger.Warn("no --encryption-key-file: Secrets with values will be refused")
			return nil, nil
		}
		path = filepath.Join(a.srv.Creds().Dir(), "encryption.keys")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if _, err := seal.RotateKeyFile(path); err != nil {
				return nil, err
			}
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	keys := &lazyKeys{log: a.log, ctx: ctx}
	a.stopKeys = stop
	sl, err := seal.New(path, keys)
	if err != nil {
		return nil, err
	}
	keys.forget = sl.Forget
	return sl, nil
}

// lazyKeys is the data key bucket, opened by the first call that needs it
// (and again by the next one when opening failed).
type lazyKeys struct {
	log *events.Log
	// ctx ends with the App; forget drops a data key some instance
	// destroyed from the sealer's cache (the watch opens with the bucket,
	// before any key of it is cached here).
	ctx    context.Context
	forget func(id string)
	mu     sync.Mutex
	keys   *events.KeyBucket
}

var _ seal.KeyStore = (*lazyKeys)(nil)

func (l *lazyKeys) bucket(ctx context.Context) (*events.KeyBucket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		k, err := l.log.Keys(ctx)
		if err != nil {
			return nil, err
		}
		if err := k.WatchDestroyed(l.ctx, l.forget); err != nil {
			return nil, err
		}
		l.keys = k
	}
	return l.keys, nil
}

func (l *lazyKeys) Create(ctx context.Context, id string, value []byte) error {
	b, err := l.bucket(ctx)
	if err != nil {
		return err
	}
	return b.Create(ctx, id, value)
}

func (l *lazyKeys) Get(ctx context.Context, id string) ([]byte, error) {
	b, err := l.bucket(ctx)
	if err != nil {
		return nil, err
	}
	return b.Get(ctx, id)
}

func (l *lazyKeys) Destroy(ctx context.Context, prefix string) (int, error) {
	b, err := l.bucket(ctx)
	if err != nil {
		return 0, err
	}
	return b.Destroy(ctx, prefix)
}

// clearSecrets is the projection as the pod reconciler reads it: Secrets'
// values opened, since it hands them to node agents as env (as a kubelet
// receives them), in the node's own work item and never in the log.
type clearSecrets struct {
	store  *projections.Store
	sealer *seal.Sealer
}

func (c clearSecrets) Get(k projections.Key) *schemas.Object {
	o := c.store.Get(k)
	if o == nil || !seal.Holds(o) {
		return o
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.sealer.Reveal(ctx, o)
}

// revealApply runs the Apply reconciler on objects whose sealed manifest
// (a Kubernetes Secret) is opened: the gate seals it in the log, the
// cluster gets it in clear, as kubectl would send it.
type revealApply struct {
	*apply.Reconciler
	sealer *seal.Sealer
}

func (r revealApply) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	if seal.Holds(obj) {
		obj = r.sealer.Reveal(ctx, obj)
	}
	return r.Reconciler.Reconcile(ctx, obj)
}

// admitObserved passes the bridge's observations through the gate, which
// checks the cluster's bridge writes only its own keys and seals what a
// Secret holds (decision 0037).
func (a *App) admitObserved(ctx context.Context, ev *schemas.Event) error {
	cluster, _, _ := strings.Cut(ev.GetKey().GetNamespace(), "/")
	if actor, ok := strings.CutPrefix(ev.GetActor(), "bridge/"); ok {
		cluster = actor
	}
	return a.gate.Observe(ctx, gate.Principal{Name: ev.GetActor(), Role: gate.RoleBridge, Self: cluster}, ev)
}
