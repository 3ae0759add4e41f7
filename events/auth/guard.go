package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
)

// OwnersBucket records which credential created each consumer an outside
// credential (subscriber or node) made: key "<stream>.<consumer>", value
// the credential's name. It outlives restarts, so that revoking a
// credential removes what it made whenever that was.
const OwnersBucket = "JP_CONSUMER_OWNERS"

// DefaultMaxConsumers is how many consumers one outside credential may
// hold at once, over every stream.
const DefaultMaxConsumers = 64

// GuardConfig configures Guard.
type GuardConfig struct {
	// Store names the credentials; Conn is the instance's connection.
	Store *Store
	Conn  *nats.Conn
	// MaxConsumers per outside credential (default DefaultMaxConsumers).
	MaxConsumers int
	// Replicas of OwnersBucket (default 1).
	Replicas int
	Logger   *slog.Logger
}

// Guard keeps outside credentials' consumers in bounds, until ctx ends.
// NATS permissions match whole subject tokens, so they cannot confine a
// subscriber to consumer names of its own; the guard does it after the
// fact instead, from the server's audit of every JetStream API call
// (which names the calling user):
//
//   - a credential holding more than MaxConsumers has each further one
//     deleted as soon as it is made;
//   - a create that lands on a consumer another credential made (which
//     JetStream treats as an update: a new filter) deletes that consumer,
//     so that its owner's next read fails instead of silently reading
//     another selection;
//   - a revoked or removed credential's consumers are deleted, also those
//     made before a restart (OwnersBucket).
//
// The instance's own consumers are never touched. See decision 0040.
func Guard(ctx context.Context, cfg GuardConfig) error {
	if cfg.MaxConsumers == 0 {
		cfg.MaxConsumers = DefaultMaxConsumers
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return fmt.Errorf("consumer guard: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: OwnersBucket, Description: "jetplane: who made each outside consumer", History: 1,
		Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("consumer guard: bucket %s: %w", OwnersBucket, err)
	}
	g := &guard{cfg: cfg, js: js, kv: kv, owner: map[string]string{}, held: map[string]map[string]bool{},
		checked: map[string]time.Time{}, doomed: make(chan string, 1<<16)}
	if err := g.load(ctx); err != nil {
		return err
	}
	// Deleting a durable consumer takes the server a while: deletions run
	// in parallel, so that they keep up with a credential creating as fast
	// as it can.
	for range deleters {
		go g.deleter(ctx)
	}
	audits := make(chan *nats.Msg, 8192)
	sub, err := cfg.Conn.ChanSubscribe("$JS.EVENT.ADVISORY.API", audits)
	if err != nil {
		return fmt.Errorf("consumer guard: %w", err)
	}
	defer sub.Unsubscribe()
	deleted := make(chan *nats.Msg, 8192)
	dsub, err := cfg.Conn.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.>", deleted)
	if err != nil {
		return fmt.Errorf("consumer guard: %w", err)
	}
	defer dsub.Unsubscribe()
	_ = cfg.Conn.Flush()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	g.sweep(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-audits:
			g.audit(ctx, m.Data)
		case m := <-deleted:
			// $JS.EVENT.ADVISORY.CONSUMER.DELETED.<stream>.<consumer>
			if tok := strings.Split(m.Subject, "."); len(tok) == 7 {
				g.forget(ctx, tok[5]+"."+tok[6])
			}
		case <-sweep.C:
			g.sweep(ctx)
		}
	}
}

type guard struct {
	cfg   GuardConfig
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	owner map[string]string          // "<stream>.<consumer>" → credential
	held  map[string]map[string]bool // credential → its consumers
	// keys maps public keys to credentials, refreshed by sweep and on a miss.
	keys    map[string]Cred
	keysAge time.Time
	// checked is when each credential's records were last checked
	// against the server; doomed queues consumers to delete.
	checked map[string]time.Time
	doomed  chan string
	warned  time.Time
	// buckets are the controllers whose members bucket this guard has
	// made (events.EnsureControllerBucket); a controller's credential
	// may not configure its bucket itself.
	buckets map[string]bool
}

// ensureBuckets makes the members bucket of each live controller
// credential that has none from this guard yet; a failure is tried
// again at the next sweep.
func (g *guard) ensureBuckets(ctx context.Context) {
	for _, c := range g.keys {
		if c.Role != RoleController || c.Revoked != nil || g.buckets[c.Name] {
			continue
		}
		if err := events.EnsureControllerBucket(ctx, g.js, c.Name); err != nil {
			if ctx.Err() == nil {
				g.cfg.Logger.Warn("controller bucket not made; trying again", "controller", c.Name, "err", err)
			}
			continue
		}
		if g.buckets == nil {
			g.buckets = map[string]bool{}
		}
		g.buckets[c.Name] = true
	}
}

// deleters is how many deletions run at once.
const deleters = 32

func (g *guard) deleter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-g.doomed:
			stream, name, _ := strings.Cut(id, ".")
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := g.js.DeleteConsumer(dctx, stream, name)
			cancel()
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
				g.cfg.Logger.Warn("consumer guard: delete failed", "stream", stream, "consumer", name, "err", err)
			}
		}
	}
}

func (g *guard) load(ctx context.Context) error {
	lister, err := g.kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("consumer guard: %w", err)
	}
	for k := range lister.Keys() {
		e, err := g.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		g.remember(k, string(e.Value()))
	}
	return nil
}

func (g *guard) remember(id, cred string) {
	g.owner[id] = cred
	if g.held[cred] == nil {
		g.held[cred] = map[string]bool{}
	}
	g.held[cred][id] = true
}

// forget drops the record of consumer id (it is gone).
func (g *guard) forget(ctx context.Context, id string) {
	cred, ok := g.owner[id]
	if !ok {
		return
	}
	delete(g.owner, id)
	delete(g.held[cred], id)
	_ = g.kv.Purge(ctx, id)
}

// remove deletes consumer id and its record.
func (g *guard) remove(ctx context.Context, id string) {
	g.forget(ctx, id)
	select {
	case g.doomed <- id:
	case <-ctx.Done():
	}
}

// cred is the outside credential with public key key, if any.
func (g *guard) cred(key string) (Cred, bool) {
	c, ok := g.keys[key]
	if !ok && time.Since(g.keysAge) > 100*time.Millisecond {
		g.refresh()
		c, ok = g.keys[key]
	}
	return c, ok
}

func (g *guard) refresh() {
	list, err := g.cfg.Store.List()
	if err != nil {
		return
	}
	g.keys = make(map[string]Cred, len(list))
	for _, c := range list {
		g.keys[c.Key] = c
	}
	g.keysAge = time.Now()
}

type auditMsg struct {
	Client *struct {
		User string `json:"user"`
	} `json:"client"`
	Subject  string `json:"subject"`
	Response string `json:"response"`
}

type createResponse struct {
	Stream string `json:"stream_name"`
	Name   string `json:"name"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func (g *guard) audit(ctx context.Context, data []byte) {
	var a auditMsg
	if json.Unmarshal(data, &a) != nil || a.Client == nil {
		return
	}
	if !strings.HasPrefix(a.Subject, "$JS.API.CONSUMER.CREATE.") && !strings.HasPrefix(a.Subject, "$JS.API.CONSUMER.DURABLE.CREATE.") {
		return
	}
	c, ok := g.cred(a.Client.User)
	if !ok || c.Role == RoleInstance {
		return // the instance's own, or no outside credential
	}
	var r createResponse
	if json.Unmarshal([]byte(a.Response), &r) != nil || r.Error != nil || r.Stream == "" || r.Name == "" {
		return
	}
	id := r.Stream + "." + r.Name
	switch prev, ok := g.owner[id]; {
	case c.Revoked != nil:
		g.remember(id, c.Name)
		g.remove(ctx, id)
		return
	case ok && prev != c.Name:
		g.cfg.Logger.Warn("consumer guard: a credential changed another's consumer; removed it",
			"stream", r.Stream, "consumer", r.Name, "owner", prev, "by", c.Name)
		g.remove(ctx, id)
		return
	case ok:
		return // its own, made again
	}
	if len(g.held[c.Name]) >= g.cfg.MaxConsumers && time.Since(g.checked[c.Name]) > time.Second {
		// At the limit: drop records of consumers that went away unseen
		// (an inactive ephemeral), at most once a second.
		g.checked[c.Name] = time.Now()
		for other := range g.held[c.Name] {
			stream, name, _ := strings.Cut(other, ".")
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := g.js.Consumer(ictx, stream, name)
			cancel()
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				g.forget(ctx, other)
			}
		}
	}
	if len(g.held[c.Name]) >= g.cfg.MaxConsumers {
		if time.Since(g.warned) > 10*time.Second {
			g.warned = time.Now()
			g.cfg.Logger.Warn("consumer guard: a credential is over its consumer limit; its newest consumers are removed",
				"credential", c.Name, "limit", g.cfg.MaxConsumers, "stream", r.Stream, "consumer", r.Name)
		}
		select {
		case g.doomed <- id:
		case <-ctx.Done():
		}
		return
	}
	g.remember(id, c.Name)
	if _, err := g.kv.Put(ctx, id, []byte(c.Name)); err != nil {
		g.cfg.Logger.Warn("consumer guard: record failed", "consumer", id, "err", err)
	}
}

// sweep removes the consumers of credentials revoked or removed.
func (g *guard) sweep(ctx context.Context) {
	g.refresh()
	if g.keys == nil {
		return
	}
	live := map[string]bool{}
	for _, c := range g.keys {
		if c.Revoked == nil {
			live[c.Name] = true
		}
	}
	g.ensureBuckets(ctx)
	for cred, ids := range g.held {
		if live[cred] {
			continue
		}
		for id := range ids {
			g.remove(ctx, id)
		}
		if len(g.held[cred]) == 0 {
			delete(g.held, cred)
		}
	}
}
