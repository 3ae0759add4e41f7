// Package subscription is the reconciler of the Subscription kind: it hands
// every change of the log that a subscription selects to the subscription's
// sink, as a CloudEvent POSTed over HTTP, at least once and in order per
// object, and keeps the subscription's place in the log in its status.
//
// A subscription is one key of the partitioned runtime, so at most one
// instance delivers for it at a time, and when that instance dies the
// survivor that takes its partition goes on from the place the status
// recorded: deliveries after that place may be sent again (at least once),
// none is skipped. The reconciler is woken by every change its
// subscriptions select (it is a Watcher), so a delivery follows a change
// without polling.
//
// What it must not do: write anything but the subscription's status, or
// deliver a change its creator could not read (the gate refuses a filter
// that reaches beyond the creator's namespaces when the subscription is
// applied).
package subscription

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
	sub "github.com/jetplane/jetplane/schemas/subscription"
)

// Kind is the kind this package reconciles.
const Kind = sub.Kind

// Phases a subscription's status shows.
const (
	PhaseDelivering = "Delivering"
	PhaseFailed     = "Failed"
)

// Feed is where changes come from.
type Feed interface {
	Read(ctx context.Context, opts projections.FeedOptions, fn func(projections.Change) error) error
}

// Log answers where a time falls in the log.
type Log interface {
	SequenceAt(ctx context.Context, t time.Time) (uint64, error)
}

// State reads objects with Secret values opened (for the signing key).
type State interface {
	Get(k projections.Key) *schemas.Object
}

// Config configures a Reconciler.
type Config struct {
	Feed  Feed
	Log   Log
	State State
	// Mask replaces Secret values in an object before it is delivered.
	Mask func(*schemas.Object) *schemas.Object
	// Client sends deliveries; nil builds one that refuses private and
	// loopback addresses unless PrivateSinks.
	Client       *http.Client
	PrivateSinks bool
	// Batch is how many changes one run reads at most (default 1000).
	Batch int
	// RunBudget bounds how long a run retries a failing sink before it
	// records its place and leaves the retry to the runtime's backoff
	// (default 5 s).
	RunBudget time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Head is the last sequence the projection has folded: a read that
	// reached it has passed every event up to it.
	Head func() uint64
}

func (c *Config) validate() error {
	if c.Feed == nil || c.Log == nil || c.State == nil || c.Head == nil {
		return errors.New("subscription: Feed, Log, State and Head are required")
	}
	if c.Mask == nil {
		c.Mask = func(o *schemas.Object) *schemas.Object { return o }
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.RunBudget <= 0 {
		c.RunBudget = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Client == nil {
		c.Client = NewClient(c.PrivateSinks)
	}
	return nil
}

// Reconciler delivers subscriptions.
type Reconciler struct {
	cfg Config

	mu sync.RWMutex
	// active are the subscriptions this instance delivers, for Owners.
	active map[projections.Key]*sub.Spec
	// cursor is how far this instance has read past the recorded place
	// without anything to deliver (a read that delivers nothing writes no
	// status, so the log does not grow by reading it).
	cursor map[projections.Key]cursor
}

type cursor struct {
	uid string
	seq uint64
}

var (
	_ reconcilers.Reconciler = (*Reconciler)(nil)
	_ reconcilers.Watcher    = (*Reconciler)(nil)
)

// New returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Reconciler{cfg: cfg, active: map[projections.Key]*sub.Spec{}, cursor: map[projections.Key]cursor{}}, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string { return []string{Kind} }

// Owners implements reconcilers.Watcher: a change wakes the subscriptions
// whose filter selects it.
func (r *Reconciler) Owners(rec *schemas.ObjectRecord) []projections.Key {
	if rec.GetKind() == Kind {
		return nil // a subscription's own changes are never delivered
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []projections.Key
	md := rec.GetMetadata()
	for k, s := range r.active {
		f := s.Filter
		f.Types = nil // any event of a selected object may be selected
		if f.Match(rec.GetKind(), md.GetNamespace(), md.GetLabels(), schemas.EventType_EVENT_TYPE_UNSPECIFIED) {
			out = append(out, k)
		}
	}
	return out
}

// status is the place and counters a subscription's status.details keeps.
type status struct {
	Delivered    uint64
	Count        uint64
	Lag          uint64
	Failures     uint64
	LastError    string
	FailingSince time.Time
	FailedGen    int64
}

func readStatus(obj *schemas.Object) (status, bool) {
	d := obj.GetStatus().GetDetails().GetFields()
	if d == nil || d["delivered"] == nil {
		return status{}, false
	}
	num := func(k string) uint64 {
		n, _ := strconv.ParseUint(d[k].GetStringValue(), 10, 64)
		return n
	}
	st := status{Delivered: num("delivered"), Count: num("count"), Lag: num("lag"), Failures: num("failures"),
		LastError: d["lastError"].GetStringValue()}
	if t, err := time.Parse(time.RFC3339Nano, d["failingSince"].GetStringValue()); err == nil {
		st.FailingSince = t
	}
	st.FailedGen = int64(num("failedGeneration"))
	return st, true
}

func (st status) details() *structpb.Struct {
	f := map[string]*structpb.Value{
		"delivered": structpb.NewStringValue(strconv.FormatUint(st.Delivered, 10)),
		"count":     structpb.NewStringValue(strconv.FormatUint(st.Count, 10)),
		"lag":       structpb.NewStringValue(strconv.FormatUint(st.Lag, 10)),
		"failures":  structpb.NewStringValue(strconv.FormatUint(st.Failures, 10)),
	}
	if st.LastError != "" {
		f["lastError"] = structpb.NewStringValue(st.LastError)
	}
	if !st.FailingSince.IsZero() {
		f["failingSince"] = structpb.NewStringValue(st.FailingSince.UTC().Format(time.RFC3339Nano))
	}
	if st.FailedGen != 0 {
		f["failedGeneration"] = structpb.NewStringValue(strconv.FormatInt(st.FailedGen, 10))
	}
	return &structpb.Struct{Fields: f}
}

// Reconcile implements reconcilers.Reconciler: one batch of deliveries.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	key := projections.ObjectKey(obj)
	spec, err := sub.Decode(obj.GetSpec())
	if err != nil {
		r.forget(key)
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	st, started := readStatus(obj)
	gen := obj.GetMetadata().GetGeneration()
	if st.FailedGen != 0 && st.FailedGen == gen {
		// Parked: the sink failed for longer than failAfter. A change of
		// the spec resumes from the same place.
		r.forget(key)
		return r.result(st), reconcilers.Terminal(fmt.Errorf("sink failed for longer than %s: %s; change the spec to resume", spec.FailAfter, st.LastError))
	}
	if st.FailedGen != 0 {
		st.FailedGen, st.FailingSince = 0, time.Time{}
	}
	if !started {
		if st.Delivered, err = r.start(ctx, obj, spec); err != nil {
			return reconcilers.Result{}, err
		}
	}
	r.mu.Lock()
	r.active[key] = spec
	from := st.Delivered
	if c, ok := r.cursor[key]; ok && c.uid == obj.GetMetadata().GetUid() && c.seq > from {
		from = c.seq
	}
	r.mu.Unlock()

	signKey, err := r.signingKey(obj, spec)
	if err != nil {
		return r.result(st), err
	}

	// Read a batch of selected changes.
	var batch []projections.Change
	last, read := from, 0
	err = r.cfg.Feed.Read(ctx, projections.FeedOptions{From: from, Max: r.cfg.Batch}, func(c projections.Change) error {
		last = c.Sequence
		read++
		if c.Event != nil && selects(spec, c) {
			batch = append(batch, c)
		}
		return nil
	})
	if err != nil {
		return r.result(st), fmt.Errorf("read changes after %d: %w", from, err)
	}
	more := read >= r.cfg.Batch

	if len(batch) == 0 {
		r.mu.Lock()
		r.cursor[key] = cursor{uid: obj.GetMetadata().GetUid(), seq: last}
		r.mu.Unlock()
		res := r.result(st)
		if started && obj.GetStatus().GetObservedGeneration() == gen {
			res.KeepStatus = true // nothing delivered: nothing to record
		}
		if more {
			res.RequeueAfter = time.Millisecond
		}
		return res, nil
	}

	upTo, sent, failed, derr := r.deliver(ctx, spec, signKey, batch)
	st.Count += uint64(sent)
	if failed.n > 0 {
		st.Failures += failed.n
		st.LastError = failed.last
	}
	if derr == nil {
		upTo = last
	}
	if upTo > st.Delivered {
		st.Delivered = upTo
	}
	r.mu.Lock()
	r.cursor[key] = cursor{uid: obj.GetMetadata().GetUid(), seq: st.Delivered}
	r.mu.Unlock()
	if derr != nil {
		now := r.cfg.Now()
		if st.FailingSince.IsZero() {
			st.FailingSince = now
		}
		if now.Sub(st.FailingSince) >= spec.FailAfter {
			st.FailedGen = gen
			r.forget(key)
			return r.result(st), reconcilers.Terminal(fmt.Errorf("sink failed for longer than %s: %v; change the spec to resume", spec.FailAfter, derr))
		}
		return r.result(st), derr
	}
	st.FailingSince = time.Time{}
	st.Lag = r.cfg.Head() - min(st.Delivered, r.cfg.Head())
	res := r.result(st)
	if more {
		res.RequeueAfter = time.Millisecond
	}
	return res, nil
}

func (r *Reconciler) result(st status) reconcilers.Result {
	phase := PhaseDelivering
	if st.FailedGen != 0 {
		phase = PhaseFailed
	}
	return reconcilers.Result{Phase: phase, Details: st.details(), Message: st.LastError}
}

// selects reports whether the subscription delivers change c.
func selects(spec *sub.Spec, c projections.Change) bool {
	if c.Key.Kind == Kind {
		return false
	}
	var lbls map[string]string
	if c.Object != nil {
		lbls = c.Object.GetMetadata().GetLabels()
	}
	return spec.Filter.Match(c.Key.Kind, c.Key.Namespace, lbls, c.Event.GetType())
}

// start resolves where a new subscription begins.
func (r *Reconciler) start(ctx context.Context, obj *schemas.Object, spec *sub.Spec) (uint64, error) {
	switch {
	case !spec.Start.Time.IsZero():
		seq, err := r.cfg.Log.SequenceAt(ctx, spec.Start.Time)
		if err != nil {
			return 0, fmt.Errorf("find start %s: %w", spec.Start.Time.Format(time.RFC3339), err)
		}
		if seq > 0 {
			seq--
		}
		return seq, nil
	case spec.Start.Now:
		return obj.GetMetadata().GetResourceVersion(), nil
	}
	return spec.Start.Sequence, nil
}

// signingKey reads the Secret key that signs deliveries.
func (r *Reconciler) signingKey(obj *schemas.Object, spec *sub.Spec) ([]byte, error) {
	if spec.SigningKey == nil {
		return nil, nil
	}
	k := projections.Key{Kind: "Secret", Namespace: obj.GetMetadata().GetNamespace(), Name: spec.SigningKey.Name}
	sec := r.cfg.State.Get(k)
	if sec == nil {
		return nil, fmt.Errorf("spec.sink.signingSecret: Secret %s/%s does not exist", k.Namespace, k.Name)
	}
	fields := sec.GetSpec().GetFields()
	if v, ok := fields["stringData"].GetStructValue().GetFields()[spec.SigningKey.Key]; ok {
		return []byte(v.GetStringValue()), nil
	}
	v, ok := fields["data"].GetStructValue().GetFields()[spec.SigningKey.Key]
	if !ok {
		return nil, fmt.Errorf("spec.sink.signingSecret: Secret %s/%s has no key %q", k.Namespace, k.Name, spec.SigningKey.Key)
	}
	b, err := base64.StdEncoding.DecodeString(v.GetStringValue())
	if err != nil {
		return nil, fmt.Errorf("spec.sink.signingSecret: Secret %s/%s data[%q] is not base64", k.Namespace, k.Name, spec.SigningKey.Key)
	}
	return b, nil
}

// attempts counts failed delivery attempts and keeps the last one's error.
type attempts struct {
	mu   sync.Mutex
	n    uint64
	last string
}

func (a *attempts) add(err error) {
	a.mu.Lock()
	a.n++
	a.last = err.Error()
	a.mu.Unlock()
}

// deliver POSTs batch, one object's changes in order and up to
// spec.MaxInFlight objects at once. It returns the sequence up to which
// every change was delivered (the place to record), how many deliveries
// succeeded, the failed attempts, and the first error when some change
// could not be delivered within the run's budget.
func (r *Reconciler) deliver(ctx context.Context, spec *sub.Spec, key []byte, batch []projections.Change) (uint64, int, *attempts, error) {
	failed := &attempts{}
	byKey := map[projections.Key][]int{}
	var order []projections.Key
	for i, c := range batch {
		if _, ok := byKey[c.Key]; !ok {
			order = append(order, c.Key)
		}
		byKey[c.Key] = append(byKey[c.Key], i)
	}
	ok := make([]bool, len(batch))
	var (
		mu       sync.Mutex
		firstErr error
		sent     int
	)
	runCtx, cancel := context.WithTimeout(ctx, r.cfg.RunBudget)
	defer cancel()
	sem := make(chan struct{}, spec.MaxInFlight)
	var wg sync.WaitGroup
	for _, k := range order {
		idx := byKey[k]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, i := range idx {
				if err := r.send(runCtx, spec, key, batch[i], failed); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return // later changes of this object wait: order per object
				}
				mu.Lock()
				ok[i] = true
				sent++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		return batch[len(batch)-1].Sequence, sent, failed, nil
	}
	// The place is just before the first change not delivered.
	var upTo uint64
	for i, c := range batch {
		if !ok[i] {
			upTo = c.Sequence - 1
			break
		}
	}
	return upTo, sent, failed, firstErr
}

// send delivers one change, retrying with backoff until ctx ends.
func (r *Reconciler) send(ctx context.Context, spec *sub.Spec, key []byte, c projections.Change, failed *attempts) error {
	obj := c.Object
	if obj != nil {
		obj = r.cfg.Mask(obj)
	}
	ev, err := sub.NewEvent(c.Event, obj)
	if err != nil {
		return err
	}
	pause := 100 * time.Millisecond
	for {
		err := r.post(ctx, spec, key, ev)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil {
			failed.add(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(pause*2, 2*time.Second)
	}
}

func (r *Reconciler) post(ctx context.Context, spec *sub.Spec, key []byte, ev *sub.Event) error {
	req, err := sub.Encode(ev, spec.Mode, key, r.cfg.Now())
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.Sink.String(), bytes.NewReader(req.Body))
	if err != nil {
		return err
	}
	hr.Header = req.Header
	resp, err := r.cfg.Client.Do(hr)
	if err != nil {
		return fmt.Errorf("deliver %s to %s: %w", ev.Sequence, spec.Sink.Redacted(), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("deliver %s to %s: %s", ev.Sequence, spec.Sink.Redacted(), resp.Status)
	}
	return nil
}

// Finalize implements reconcilers.Reconciler.
func (r *Reconciler) Finalize(_ context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	r.forget(projections.ObjectKey(obj))
	return reconcilers.Result{}, nil
}

func (r *Reconciler) forget(k projections.Key) {
	r.mu.Lock()
	delete(r.active, k)
	delete(r.cursor, k)
	r.mu.Unlock()
}

// ErrPrivateSink means a sink's address is on the host's own networks.
var ErrPrivateSink = errors.New("sink address is loopback, private or link-local; serve with --subscription-private-sinks to allow it")

// NewClient is the HTTP client deliveries use. Unless private is set it
// refuses to connect to loopback, private, link-local and unspecified
// addresses, checked on the address actually dialled (so a name that
// resolves to one later is refused too): a subscription must not become a
// way to reach the control plane's own network.
func NewClient(private bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if !private {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
				return fmt.Errorf("%s: %w", address, ErrPrivateSink)
			}
			return nil
		}
	}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
