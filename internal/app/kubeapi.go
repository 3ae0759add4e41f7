package app

import (
	"context"
	"time"

	"github.com/jetplane/jetplane/bridge/kubeapi"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas/crd"
)

// mountKubernetes serves the Kubernetes API on the API's listener
// (decision 0065): reads from the store, writes through the gate, with the
// API's tokens.
func (a *App) mountKubernetes(defined func() *crd.Catalog, b projections.Blobs) error {
	k, err := kubeapi.New(kubeapi.Config{
		Gate: a.gate, Store: a.store, Authenticate: a.api.KubeCaller, Defined: defined,
		Sealer: a.seal, Log: a.log, History: kubeHistory{log: a.log, blobs: b}, Version: a.version().Version,
		Logger: a.cfg.Logger,
	})
	if err != nil {
		return err
	}
	a.api.MountKubernetes(k)
	return nil
}

// kubeHistory answers ?asOf= reads of the Kubernetes API from the log.
type kubeHistory struct {
	log   *events.Log
	blobs projections.Blobs
}

func (h kubeHistory) StateAt(ctx context.Context, seq uint64) (*projections.Store, error) {
	return projections.StateAt(ctx, h.log, h.blobs, seq)
}

func (h kubeHistory) SequenceAt(ctx context.Context, t time.Time) (uint64, error) {
	return h.log.SequenceAt(ctx, t)
}
