package app

import (
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/subscription"
)

// subscriptions builds the reconciler of the Subscription kind: it reads
// changes from the projection (and the log, for changes older than the
// watch window), signs with keys read from opened Secrets, and delivers
// objects with their Secret values masked.
func (a *App) subscriptions(blobs projections.Blobs) (*subscription.Reconciler, error) {
	feed := projections.Feed{Store: a.store, Log: a.log, Blobs: blobs}
	return subscription.New(subscription.Config{
		Feed: feed, Log: a.log, State: clearSecrets{a.store, a.seal}, Mask: seal.Mask,
		PrivateSinks: a.cfg.SubscriptionPrivateSinks, Head: a.store.Seq,
	})
}
