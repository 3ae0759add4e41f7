package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/retry"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

// newHelmRelease builds the HelmRelease reconciler. It writes children
// through the gate, which exists only after the runtime that runs it, so
// the writer reads a.gate when called. ar is nil without clusters.
func (a *App) newHelmRelease(charts *events.Charts, ar *apply.Reconciler) (*helmrelease.Reconciler, error) {
	cfg := helmrelease.Config{
		State:  helmState{clearSecrets{a.store, a.seal}},
		Writer: gateWriter{a},
		Charts: chartStore{charts},
		// Opened: a rollback writes a revision's Secrets again as they
		// were, and the gate seals them again.
		History: func(ctx context.Context, k projections.Key) ([]*schemas.Event, error) {
			evs, err := a.log.History(ctx, k.Proto())
			if err != nil || a.seal == nil {
				return evs, err
			}
			for i, ev := range evs {
				if o := ev.GetObject(); o != nil && seal.Holds(o) {
					ev = proto.CloneOf(ev)
					ev.Object = a.seal.Reveal(ctx, o)
					evs[i] = ev
				}
			}
			return evs, nil
		},
		Reconciled: func(kind string) bool { return a.runtime != nil && a.runtime.Handles(kind) },
		Actor:      actor(a.cfg.Instance),
	}
	if ar != nil {
		cfg.Capabilities = ar.Capabilities
		cfg.ClusterLookup = a.clusterLookup()
	}
	return helmrelease.New(cfg)
}

type gateWriter struct{ a *App }

// Apply writes a release's children as a controller acting for owner, in
// the scope of whoever last set owner's spec (decision 0038).
func (w gateWriter) Apply(ctx context.Context, owner *schemas.Object, actor string, objs []*schemas.Object) (int, error) {
	out, err := w.a.gate.Apply(ctx, gate.Controller(actor, owner), objs, "")
	n := 0
	for _, o := range out {
		if o.Action != gate.Unchanged {
			n++
			// Nobody waits on this write's answer: what a child asks
			// for that cannot work here goes to the log of the instance.
			for _, m := range o.Warnings {
				w.a.cfg.Logger.Warn("chart child accepted with a warning", "release", gate.OwnerRef(projections.ObjectKey(owner)), "warning", m)
			}
		}
	}
	return n, ownerError(err)
}

func (w gateWriter) Delete(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error {
	_, err := w.a.gate.Delete(ctx, gate.Controller(actor, owner), k, "")
	if errors.Is(err, gate.ErrNotFound) {
		return nil
	}
	return ownerError(err)
}

// ownerError tells the release which refusals are about ownership. A
// write out of the release's scope is the release's fault: terminal.
func ownerError(err error) error {
	switch {
	case errors.Is(err, gate.ErrAdoption):
		return fmt.Errorf("%w: %w", helmrelease.ErrNotOwner, err)
	case errors.Is(err, gate.ErrForbidden), errors.Is(err, gate.ErrInvalid):
		return reconcilers.Terminal(err)
	}
	return err
}

type chartStore struct{ c *events.Charts }

func (s chartStore) Get(ctx context.Context, name, version string) ([]byte, error) {
	data, err := s.c.Get(ctx, name, version)
	if errors.Is(err, events.ErrNotFound) {
		return nil, fmt.Errorf("%s:%s: %w", name, version, helmrelease.ErrChartNotFound)
	}
	return data, err
}

func actor(instance string) string {
	if instance == "" {
		return "reconciler/" + helmrelease.Kind
	}
	return "reconciler/" + helmrelease.Kind + "@" + instance
}

// openCharts opens the chart bucket like openLog opens the log: a new
// cluster may still be electing its metadata leader, so short attempts
// are retried for up to two minutes.
func openCharts(ctx context.Context, l *events.Log, logger *slog.Logger) (*events.Charts, error) {
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var charts *events.Charts
	err := retry.Do(wait, retry.Constant(500*time.Millisecond), func(attempt int, err error, _ time.Duration) {
		if retry.Often(attempt) {
			logger.Info("waiting for JetStream to place the chart store", "err", err)
		}
	}, func(int) (err error) {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		charts, err = l.Charts(octx)
		return err
	})
	return charts, err
}

// helmState is the projection as the HelmRelease reconciler reads it:
// Secrets named in valuesFrom opened, since their values become chart
// values (rendered into children, as helm would).
type helmState struct{ clearSecrets }

func (h helmState) List(q projections.Query) ([]*schemas.Object, uint64) { return h.store.List(q) }

// clusterLookup answers a release's lookups from the live objects of the
// cluster it names, one client per cluster.
func (a *App) clusterLookup() func(string) (engine.ClientProvider, error) {
	var mu sync.Mutex
	made := map[string]engine.ClientProvider{}
	return func(name string) (engine.ClientProvider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := made[name]; ok {
			return p, nil
		}
		for _, c := range a.cfg.Clusters {
			if c.Name != name {
				continue
			}
			rc, err := c.RESTConfig()
			if err != nil {
				return nil, err
			}
			p, err := helmrelease.ClusterLookup(rc)
			if err != nil {
				return nil, err
			}
			made[name] = p
			return p, nil
		}
		return nil, fmt.Errorf("no cluster named %q", name)
	}
}
