// Package gate is the one way desired state enters the log: it turns
// validated objects into Applied events and delete requests into
// DeleteRequested events, atomically per batch, with optimistic concurrency
// against the state it read. Every write carries a Principal, which
// Authorize (a pure function, its rules in testdata/authz) checks; the
// gate seals every Secret value a write carries, records the owner and
// scope of what controllers write, and refuses adoption without the
// object's consent (decisions 0037, 0038). It rejects dependsOn cycles
// (naming the cycle) and waits until its writes are visible in the
// projection, so a client reads its own writes. It never reconciles.
package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/kinds"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// Log is what the gate writes to.
type Log interface {
	AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error)
	LastSequence(ctx context.Context) (uint64, error)
	// KeyVersion finds the last event of a key the projection no longer
	// holds.
	KeyVersion(ctx context.Context, k *schemas.ObjectKey) (uint64, error)
	// History reads a key's events; the gate reads it only when a request
	// with an idempotency key turns out to be stored already.
	History(ctx context.Context, k *schemas.ObjectKey) ([]*schemas.Event, error)
}

// State is the projection the gate reads.
type State interface {
	Get(k projections.Key) *schemas.Object
	WaitFor(ctx context.Context, seq uint64) error
}

var (
	_ Log   = (*events.Log)(nil)
	_ State = (*projections.Store)(nil)
)

// invalidError is a refusal whose message says what to do; it matches
// ErrInvalid.
type invalidError struct{ msg string }

func (e invalidError) Error() string        { return e.msg }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return invalidError{msg: fmt.Sprintf(format, args...)}
}

var (
	// ErrInvalid marks a request the gate refuses whatever the state
	// (a dependsOn cycle, a change to an object being deleted).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound means the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge means a write holds more objects than one atomic write
	// can (HTTP 413): refused whole, nothing written.
	ErrTooLarge = errors.New("too many objects for one atomic write")
	// ErrIdempotencyMismatch means an idempotency key was used before for
	// a request with another body (HTTP 422).
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
)

// Config configures a Gate.
type Config struct {
	Log   Log
	State State
	// Finalizes reports whether something (a reconciler) finalizes objects
	// of kind. Objects of other kinds are finalized as soon as deletion is
	// requested. Nil means no kind has a finalizer.
	Finalizes func(kind string) bool
	// Controller names the controller credential that runs kind, "" when
	// none does or jetplane's own reconcilers run it: status writes of a
	// kind pass for its controller (Target.Controller). Nil: none.
	Controller func(kind string) string
	// Kinds lists the kinds objects in the log have, which dependsOn
	// entries resolve against (see package kinds); default: State's own
	// Kinds method when it has one, else only the built-in kinds.
	Kinds func() []string
	// Sealer seals every Secret value a write carries (decision 0037);
	// nil refuses writes that carry secret values.
	Sealer *seal.Sealer
	// Admit checks objects against the kinds in effect and returns them as
	// they are to be stored (KindCheck.Admit); nil takes every kind as
	// written.
	Admit func([]*schemas.Object) ([]*schemas.Object, error)
	// AtomicGroups commits concurrent single-object writes as one atomic
	// batch (one fsync, for a log that fsyncs every write); otherwise
	// they are pipelined together (commit.go, decision 0051).
	AtomicGroups bool
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Gate validates and records desired state. Safe for concurrent use.
type Gate struct {
	cfg   Config
	group *groupWriter
}

// New validates cfg and returns a gate.
func New(cfg Config) (*Gate, error) {
	if cfg.Log == nil || cfg.State == nil {
		return nil, errors.New("gate: log and state are required")
	}
	if cfg.Finalizes == nil {
		cfg.Finalizes = func(string) bool { return false }
	}
	if cfg.Controller == nil {
		cfg.Controller = func(string) string { return "" }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Kinds == nil {
		if k, ok := cfg.State.(interface{ Kinds() []string }); ok {
			cfg.Kinds = k.Kinds
		} else {
			cfg.Kinds = func() []string { return nil }
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Gate{cfg: cfg, group: newGroupWriter(cfg.Log, cfg.AtomicGroups)}, nil
}

// Action says what an apply did to one object.
type Action string

// Actions, as kubectl prints them.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
)

// Outcome is the result for one object.
type Outcome struct {
	Key    projections.Key
	Action Action
	// Object is the object as the projection holds it after the write
	// (nil once deleted); for a dry run, the object as it would be stored.
	Object *schemas.Object
	// Previous is the object before the request (nil when it is new); set
	// by DryRun.
	Previous *schemas.Object
	// Warnings say what the object asks for that jetplane accepts but
	// cannot give (Warnings), for whoever wrote it.
	Warnings []string
}

// maxAttempts bounds retries after optimistic-concurrency conflicts.
const maxAttempts = 5

// Apply records objs as desired state on behalf of p. The whole request
// is validated, authorized (Authorize) and its Secrets sealed before
// anything is written; a request is written atomically, and one of more
// than events.MaxBatch objects is refused whole (ErrTooLarge).
// idempotencyKey, when not empty, makes a retried request store nothing
// twice.
func (g *Gate) Apply(ctx context.Context, p Principal, objs []*schemas.Object, idempotencyKey string) ([]Outcome, error) {
	keys, objs, err := g.prepare(ctx, p, objs)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		outcomes, err := g.applyOnce(ctx, p, keys, objs, idempotencyKey, attempt > 1)
		if !errors.Is(err, events.ErrConflict) || attempt == maxAttempts {
			return outcomes, err
		}
		// Someone wrote one of the keys after the projection we read:
		// catch up with the log and decide again.
		if err := g.catchUp(ctx); err != nil {
			return nil, err
		}
	}
}

// DryRun checks objs as Apply would — validation of dependsOn, cycles
// against current state, objects being deleted — and reports what Apply
// would do to each, with the object as it would be stored and as it is now,
// writing nothing.
func (g *Gate) DryRun(ctx context.Context, p Principal, objs []*schemas.Object) ([]Outcome, error) {
	keys, objs, err := g.prepare(ctx, p, objs)
	if err != nil {
		return nil, err
	}
	now := timestamppb.New(g.cfg.Now())
	outcomes := make([]Outcome, len(objs))
	for i, o := range objs {
		cur := g.cfg.State.Get(keys[i])
		if err := authorizeApply(p, keys[i], cur, o); err != nil {
			return nil, err
		}
		if cur.GetStatus().GetGoal() == projections.GoalDeleted {
			return nil, invalid("%s is being deleted; apply it again once it is gone", keys[i])
		}
		next, action := desired(cur, stamp(p, cur, o), now)
		if action == Unchanged {
			next = cur
		}
		outcomes[i] = Outcome{Key: keys[i], Action: action, Object: next, Previous: cur, Warnings: Warnings(o)}
	}
	return outcomes, nil
}

// prepare checks each object against the kinds in effect, checks its
// scope, authorizes p for it as far as the request alone tells, resolves
// dependsOn kinds, rejects cycles and seals secret values. It returns the
// objects' keys and the objects as they are to be stored (the callers'
// objects are not modified).
func (g *Gate) prepare(ctx context.Context, p Principal, objs []*schemas.Object) ([]projections.Key, []*schemas.Object, error) {
	// An apply is one atomic batch or nothing, whoever writes it: a larger
	// one would be written in several, and half of it could land.
	if len(objs) > events.MaxBatch {
		return nil, nil, fmt.Errorf("%w: %d objects, at most %d; split them into several applies", ErrTooLarge, len(objs), events.MaxBatch)
	}
	if g.cfg.Admit != nil {
		admitted, err := g.cfg.Admit(objs)
		if err != nil {
			return nil, nil, invalid("%v", err)
		}
		objs = admitted
	}
	keys := make([]projections.Key, len(objs))
	for i, o := range objs {
		keys[i] = projections.KeyOf(manifest.KeyOf(o))
		if keys[i].Namespace != "" && !kinds.Lookup(keys[i].Kind).Namespaced {
			return nil, nil, invalid("%s/%s: metadata.namespace: %s is cluster-scoped; remove metadata.namespace (%q)", keys[i].Kind, keys[i].Name, keys[i].Kind, keys[i].Namespace)
		}
		// The same check runs against current state before the write;
		// this one refuses early, before anything is sealed.
		if err := Authorize(p, VerbApply, target(keys[i], nil)); err != nil && !errors.Is(err, ErrAdoption) {
			return nil, nil, err
		}
		if repo := o.GetSpec().GetFields()["chart"].GetStructValue().GetFields()["repository"].GetStringValue(); repo != "" && keys[i].Kind == "HelmRelease" {
			if err := Authorize(p, VerbFetchChart, Target{Image: repo}); err != nil {
				return nil, nil, fmt.Errorf("%s: spec.chart.repository: %w", keys[i], err)
			}
		}
		if t, ok := manifestTarget(o); ok {
			// An Apply writes its manifest into a cluster: the manifest's
			// namespace must be the writer's too.
			if err := Authorize(p, VerbApply, t); err != nil {
				return nil, nil, fmt.Errorf("%s: spec.manifest: %w", keys[i], err)
			}
		}
	}
	objs, err := g.resolveDependsOn(keys, objs)
	if err != nil {
		return nil, nil, err
	}
	if err := g.checkCycles(keys, objs); err != nil {
		return nil, nil, err
	}
	if objs, err = g.seal(ctx, keys, objs); err != nil {
		return nil, nil, err
	}
	return keys, objs, nil
}

// resolveDependsOn rewrites each dependsOn kind to the kind as keys hold it
// ("deploy" and "Deployment" become "Deployment.apps"), resolving against
// the kinds in the log and in the request, so that a reference written with
// a bare kind names the object the reconcilers and the cycle check see.
// A kind that resolves to nothing in the log or the request is kept as
// written (its object may come later, in a group not known yet); an
// ambiguous one is an error.
func (g *Gate) resolveDependsOn(keys []projections.Key, objs []*schemas.Object) ([]*schemas.Object, error) {
	var seen []string
	copied := false
	for i, o := range objs {
		cloned := false
		for j, d := range o.GetMetadata().GetDependsOn() {
			if seen == nil {
				seen = g.cfg.Kinds()
				for _, k := range keys {
					seen = append(seen, k.Kind)
				}
			}
			kind, err := kinds.Resolve(d.GetKind(), seen)
			if errors.Is(err, kinds.ErrUnknown) {
				continue
			}
			if err != nil {
				return nil, invalid("%s: metadata.dependsOn[%d].kind: %v", keys[i], j, err)
			}
			if !slices.Contains(seen, kind) {
				// Nothing of the kind exists yet: which group its object
				// will have is not known, so the reference stays as written.
				continue
			}
			// A short name of a cluster-scoped kind ("ns") was taken for a
			// namespaced one when the manifest filled in the namespace.
			clusterScoped := !kinds.Lookup(kind).Namespaced && d.GetNamespace() != ""
			if kind == d.GetKind() && !clusterScoped {
				continue
			}
			if !cloned {
				if !copied {
					objs, copied = append([]*schemas.Object(nil), objs...), true
				}
				o, cloned = proto.CloneOf(o), true
				objs[i] = o
			}
			o.Metadata.DependsOn[j].Kind = kind
			if clusterScoped {
				o.Metadata.DependsOn[j].Namespace = ""
			}
		}
	}
	return objs, nil
}

func (g *Gate) catchUp(ctx context.Context) error {
	head, err := g.cfg.Log.LastSequence(ctx)
	if err != nil {
		return err
	}
	return g.cfg.State.WaitFor(ctx, head)
}

// applyOnce makes one attempt. retry says an earlier attempt conflicted:
// then keys absent from the projection are looked up in the log, since one
// may be a deleted key whose events the log's concurrency check still counts.
func (g *Gate) applyOnce(ctx context.Context, p Principal, keys []projections.Key, objs []*schemas.Object, idem string, retry bool) ([]Outcome, error) {
	actor := p.Name
	now := timestamppb.New(g.cfg.Now())
	outcomes := make([]Outcome, len(objs))
	var entries []events.Entry
	var changed []int
	for i, o := range objs {
		k := keys[i]
		cur := g.cfg.State.Get(k)
		expect := cur.GetMetadata().GetResourceVersion()
		if cur == nil && retry {
			var err error
			if cur, expect, err = g.absentVersion(ctx, k); err != nil {
				return nil, err
			}
		}
		if err := authorizeApply(p, k, cur, o); err != nil {
			return nil, err
		}
		if cur.GetStatus().GetGoal() == projections.GoalDeleted {
			return nil, invalid("%s is being deleted; apply it again once it is gone", k)
		}
		next, action := desired(cur, stamp(p, cur, o), now)
		outcomes[i] = Outcome{Key: k, Action: action, Object: cur, Warnings: Warnings(o)}
		if action == Unchanged {
			continue
		}
		ev := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k.Proto(), Object: next, Actor: actor, Time: now}
		if idem != "" {
			ev.Id = "apply/" + idem + "/" + k.String()
		}
		entries = append(entries, events.Entry{Event: ev, Expect: expect})
		changed = append(changed, i)
	}
	last, dup, err := g.write(ctx, entries)
	if err != nil {
		return nil, err
	}
	if dup {
		if err := g.sameRequest(ctx, idem, entries); err != nil {
			return nil, err
		}
	}
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return nil, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	for j, i := range changed {
		if len(entries) == 1 && !dup {
			// The one entry written is at last.
			outcomes[i].Object = g.stored(outcomes[i].Key, entries[j].Event, last)
			continue
		}
		outcomes[i].Object = g.cfg.State.Get(outcomes[i].Key)
	}
	return outcomes, nil
}

// stored is the object at k as the projection holds it after the write
// of ev (appended at seq): while k's last write is that one, its spec is
// ev's own (the projection keeps an applied object's spec as the event
// carried it), so only the rest is read; else what the projection holds.
// The object returned shares ev's spec, read-only.
func (g *Gate) stored(k projections.Key, ev *schemas.Event, seq uint64) *schemas.Object {
	rs, ok := g.cfg.State.(records)
	if !ok {
		return g.cfg.State.Get(k)
	}
	r := rs.GetRecord(k)
	if r == nil || r.GetMetadata().GetResourceVersion() != seq || ev.GetType() != schemas.EventType_EVENT_TYPE_APPLIED {
		return projections.ObjectOf(r)
	}
	spec := ev.GetObject().GetSpec()
	if spec == nil {
		spec = new(structpb.Struct)
	}
	return &schemas.Object{ApiVersion: r.ApiVersion, Kind: r.Kind, Metadata: r.Metadata, Spec: spec, Status: r.Status}
}

// absentVersion is the version to expect when writing k, which the
// projection does not hold: the sequence of k's last event in the log (a
// finalized key leaves current state but not the log), 0 if it has none.
// It returns k's object instead if the projection holds it once it has
// caught up with that event.
func (g *Gate) absentVersion(ctx context.Context, k projections.Key) (*schemas.Object, uint64, error) {
	last, err := g.cfg.Log.KeyVersion(ctx, k.Proto())
	if err != nil {
		return nil, 0, err
	}
	// Decide on a projection that includes that event, so a write that
	// lands after it is a conflict rather than silently overwritten.
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return nil, 0, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	if cur := g.cfg.State.Get(k); cur != nil {
		return cur, cur.Metadata.GetResourceVersion(), nil
	}
	return nil, last, nil
}

// write appends entries in atomic chunks and returns the last sequence
// written (or the log head, when a chunk turned out to be a stored retry),
// and whether any chunk was a stored retry.
func (g *Gate) write(ctx context.Context, entries []events.Entry) (last uint64, dup bool, err error) {
	for len(entries) > 0 {
		n := min(len(entries), events.MaxBatch)
		var res []events.Result
		var err error
		if n == 1 {
			// One object: committed with other requests' (commit.go).
			var r events.Result
			r, err = g.group.write(ctx, entries[0])
			res = []events.Result{r}
		} else {
			res, err = g.cfg.Log.AppendBatch(ctx, entries[:n])
		}
		switch {
		case errors.Is(err, events.ErrDuplicate):
			// The same idempotency key landed before: nothing to add.
			dup = true
			if last, err = g.cfg.Log.LastSequence(ctx); err != nil {
				return 0, dup, err
			}
		case err != nil:
			return 0, dup, err
		default:
			last = res[len(res)-1].Sequence
			for _, r := range res {
				dup = dup || r.Duplicate
			}
		}
		entries = entries[n:]
	}
	return last, dup, nil
}

// sameRequest checks that the events an earlier request with idempotency
// key idem stored carry what entries carry; a different body under the same
// key is ErrIdempotencyMismatch, not a retry. The log remembers event ids
// for its duplicate window (events.Config.DuplicateWindow, 2 minutes by
// default); after it, a key is free again (decision 0020).
func (g *Gate) sameRequest(ctx context.Context, idem string, entries []events.Entry) error {
	for _, e := range entries {
		evs, err := g.cfg.Log.History(ctx, e.Event.GetKey())
		if err != nil {
			return err
		}
		for _, stored := range evs {
			if stored.GetId() != e.Event.GetId() {
				continue
			}
			if !sameBody(stored.GetObject(), e.Event.GetObject()) {
				return fmt.Errorf("%w: key %q was used for a request with another %s; use a new key for a new request",
					ErrIdempotencyMismatch, idem, projections.KeyOf(e.Event.GetKey()))
			}
		}
	}
	return nil
}

// sameBody compares what a client sent, ignoring what the gate assigns.
func sameBody(a, b *schemas.Object) bool {
	strip := func(o *schemas.Object) *schemas.Object {
		o = proto.CloneOf(o)
		if m := o.GetMetadata(); m != nil {
			m.Uid, m.Generation, m.ResourceVersion, m.CreationTime, m.DeletionTime = "", 0, 0, nil, nil
		}
		o.Status = nil
		return o
	}
	return proto.Equal(strip(a), strip(b))
}

// desired computes the object to record for an apply of o over cur, and
// whether anything changed. The generation moves only when the spec does.
func desired(cur, o *schemas.Object, now *timestamppb.Timestamp) (*schemas.Object, Action) {
	next := proto.CloneOf(o)
	if next.Metadata == nil {
		next.Metadata = &schemas.ObjectMeta{}
	}
	next.Status = nil
	if cur == nil {
		next.Metadata.Uid = newUID()
		next.Metadata.Generation = 1
		next.Metadata.CreationTime = now
		return next, Created
	}
	m := next.Metadata
	m.Uid = cur.Metadata.GetUid()
	m.CreationTime = cur.Metadata.GetCreationTime()
	m.Generation = cur.Metadata.GetGeneration()
	if !proto.Equal(cur.Spec, next.Spec) {
		m.Generation++
	}
	m.ResourceVersion = cur.Metadata.GetResourceVersion()
	m.DeletionTime = cur.Metadata.GetDeletionTime()
	if next.ApiVersion == cur.ApiVersion && proto.Equal(m, cur.Metadata) && proto.Equal(cur.Spec, next.Spec) {
		return nil, Unchanged
	}
	m.ResourceVersion = 0
	return next, Configured
}

// Delete requests deletion of the object at k on behalf of p. Objects of
// kinds nobody finalizes leave current state in the same atomic write.
func (g *Gate) Delete(ctx context.Context, p Principal, k projections.Key, idempotencyKey string) (Outcome, error) {
	return g.DeleteWith(ctx, p, k, idempotencyKey, Background)
}

// DeleteWith is Delete with a propagation policy for k's dependents
// (propagation.go): Foreground and Orphan record their finalizer on k.
func (g *Gate) DeleteWith(ctx context.Context, p Principal, k projections.Key, idempotencyKey string, prop Propagation) (Outcome, error) {
	if err := checkPropagation(prop); err != nil {
		return Outcome{}, err
	}
	// Out of scope is refused before existence is told.
	if err := Authorize(p, VerbDelete, target(k, nil)); err != nil && !errors.Is(err, ErrAdoption) {
		return Outcome{}, err
	}
	for attempt := 1; ; attempt++ {
		out, err := g.deleteOnce(ctx, p, k, idempotencyKey, prop)
		if !errors.Is(err, events.ErrConflict) || attempt == maxAttempts {
			return out, err
		}
		if err := g.catchUp(ctx); err != nil {
			return Outcome{}, err
		}
	}
}

func (g *Gate) deleteOnce(ctx context.Context, p Principal, k projections.Key, idem string, prop Propagation) (Outcome, error) {
	actor := p.Name
	cur := g.cfg.State.Get(k)
	if cur == nil {
		return Outcome{}, fmt.Errorf("%s: %w", k, ErrNotFound)
	}
	if err := Authorize(p, VerbDelete, target(k, cur)); err != nil {
		return Outcome{}, err
	}
	if cur.GetStatus().GetGoal() == projections.GoalDeleted {
		return Outcome{Key: k, Action: Unchanged, Object: cur}, nil
	}
	now := timestamppb.New(g.cfg.Now())
	req := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, Key: k.Proto(), Actor: actor, Time: now}
	if idem != "" {
		req.Id = "delete/" + idem + "/" + k.String()
	} else {
		req.Id = newUID()
	}
	if f := propagationFinalizer(prop); f != "" {
		req.Object = &schemas.Object{Metadata: &schemas.ObjectMeta{Finalizers: []string{f}}}
	}
	entries := []events.Entry{{Event: req, Expect: cur.Metadata.GetResourceVersion()}}
	if !g.cfg.Finalizes(k.Kind) {
		// Nothing else will finalize this kind: finish the deletion in the
		// same atomic batch, so no reader sees it half done.
		entries = append(entries, events.Entry{
			Event:  &schemas.Event{Id: req.Id + "/finalized", Type: schemas.EventType_EVENT_TYPE_FINALIZED, Key: k.Proto(), Actor: "jetplane/finalizer", Time: now, Cause: req.Id},
			Expect: events.AnyVersion,
		})
	}
	last, _, err := g.write(ctx, entries)
	if err != nil {
		return Outcome{}, err
	}
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return Outcome{}, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	return Outcome{Key: k, Action: Deleted, Object: g.cfg.State.Get(k)}, nil
}

// checkCycles rejects a request whose dependsOn edges, together with those
// of objects already stored, form a cycle.
func (g *Gate) checkCycles(keys []projections.Key, objs []*schemas.Object) error {
	edges := map[string][]string{}
	inBatch := map[projections.Key]*schemas.Object{}
	for i, k := range keys {
		inBatch[k] = objs[i]
	}
	var queue []projections.Key
	seen := map[projections.Key]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			queue = append(queue, k)
		}
	}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		o, ok := inBatch[k]
		if !ok {
			o = g.cfg.State.Get(k)
		}
		for _, d := range o.GetMetadata().GetDependsOn() {
			dk := projections.KeyOf(d)
			edges[k.String()] = append(edges[k.String()], dk.String())
			if !seen[dk] {
				seen[dk] = true
				queue = append(queue, dk)
			}
		}
	}
	if cycle := manifest.FindCycle(edges); cycle != nil {
		return invalid("metadata.dependsOn: cycle %s; remove one of these dependencies", strings.Join(cycle, " → "))
	}
	return nil
}

// newUID returns a random RFC 4122 version 4 UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
