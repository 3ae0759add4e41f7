package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events/auth"
)

// controllerKinds caches which controller credential runs each kind, read
// from the credentials store at most once a second: the door of
// controllers' writes asks at every write, the gate at every delete.
type controllerKinds struct {
	store *auth.Store

	mu    sync.Mutex
	at    time.Time
	owner map[string]string
}

func (c *controllerKinds) of(kind string) string {
	if c == nil || c.store == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Read again once a second, and at once (at most every 50 ms) for a
	// kind not seen yet: a credential just created defines its kinds.
	if age := time.Since(c.at); age > time.Second || (c.owner[kind] == "" && age > 50*time.Millisecond) {
		if m, err := c.store.Controllers(); err == nil {
			c.owner, c.at = m, time.Now()
		}
	}
	return c.owner[kind]
}

// finalizes reports whether something finalizes objects of kind: a
// reconciler of this process, or a controller credential's process (its
// objects wait for it, as Kubernetes objects wait for their finalizers).
func (a *App) finalizes(kind string) bool {
	return a.runtime.Handles(kind) || a.ctlKinds.of(kind) != ""
}

// controllerOf names the controller credential that runs kind: "" when
// none does, or when a reconciler of this process runs it (then no
// controller may write it, as the controllers' door decides too).
func (a *App) controllerOf(kind string) string {
	if a.runtime.Handles(kind) {
		return ""
	}
	return a.ctlKinds.of(kind)
}

// controllerToken checks controllers' tokens for the APIs (auth.
// SignToken) against the credentials store; nil with an outside NATS,
// whose credentials jetplane does not hand out.
func (a *App) controllerToken() func(string) (string, error) {
	if a.srv == nil {
		return nil
	}
	creds := a.srv.Creds()
	return func(tok string) (string, error) {
		if !auth.IsToken(tok) {
			return "", nil
		}
		c, err := creds.VerifyToken(tok, time.Now())
		if err != nil && !errors.Is(err, auth.ErrBadToken) {
			return "", fmt.Errorf("%w: %w", api.ErrTokenUnchecked, err)
		}
		if err != nil {
			return "", err
		}
		return c.Name, nil
	}
}

// newControllers builds the door of out-of-process controllers' writes;
// nil with an outside NATS, whose credentials jetplane does not hand out.
func (a *App) newControllers() (*gate.Controllers, error) {
	if a.srv == nil {
		return nil, nil
	}
	a.ctlKinds = &controllerKinds{store: a.srv.Creds()}
	return gate.NewControllers(gate.ControllerConfig{Log: a.log, State: a.store, Controller: a.controllerOf, Group: a.cfg.SyncAlways})
}

// serveControllers answers controllers' writes until ctx ends.
func (a *App) serveControllers(ctx context.Context) {
	if a.controllers == nil {
		return
	}
	go func() {
		if err := a.log.ServeControllerWrites(ctx, a.controllers.Write); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Error("serving controllers' writes stopped", "err", err)
		}
	}()
}

// atomicGroups is how the gate commits concurrent single-object writes.
func atomicGroups(cfg Config) bool {
	if cfg.AtomicGroups != nil {
		return *cfg.AtomicGroups
	}
	return cfg.SyncAlways
}
