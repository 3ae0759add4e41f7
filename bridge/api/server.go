package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// MaxBodyBytes bounds an apply request body.
const MaxBodyBytes = 64 << 20

// Log is what the API reads from the log directly.
type Log interface {
	projections.Log
	// HistoryPage and LastEvents read one key's events, bounded in
	// memory (events.Log).
	HistoryPage(ctx context.Context, key *schemas.ObjectKey, after uint64, limit, maxBytes int) ([]*schemas.Event, bool, error)
	LastEvents(ctx context.Context, key *schemas.ObjectKey, n int) ([]*schemas.Event, error)
	SequenceAt(ctx context.Context, t time.Time) (uint64, error)
}

var _ Log = (*events.Log)(nil)

// Config configures a Server.
type Config struct {
	Gate  *gate.Gate
	Store *projections.Store
	Log   Log
	// Blobs holds snapshots, which speed up state-at; may be nil.
	Blobs projections.Blobs
	// Ready returns nil when the server can answer (projection caught up,
	// log reachable), else why not.
	Ready func() error
	// Clusters reports the Kubernetes clusters the bridge watches; nil
	// when it watches none.
	Clusters func() []Cluster
	// Charts keeps charts pushed with `jetplane chart push`; nil refuses
	// pushes.
	Charts ChartStore
	// Backup writes an online backup of the log; nil refuses backups.
	Backup func(ctx context.Context, w io.Writer) error
	// NextRun, when set, is the reconciler runtime's own view of when a
	// key runs next; get and list show it as status.nextRunTime (the log
	// records that time only with a status that changed otherwise).
	NextRun func(projections.Key) (time.Time, bool)
	// Tokens maps bearer tokens to user names, each an admin. With
	// Principals empty too, authentication is off: every request acts as
	// "anonymous".
	Tokens map[string]string
	// Principals are tokens with a role and namespaces (authz.go).
	Principals []Principal
	// ControllerToken checks a controller credential's token (auth.
	// SignToken) and returns the controller's name; "" and no error for a
	// token not of that shape, which the other tokens then answer. An
	// error wrapping ErrTokenUnchecked is no refusal: the credentials
	// could not be read, and the request is answered 503. Nil:
	// controllers authenticate only to NATS.
	ControllerToken func(token string) (controller string, err error)
	// Sealer seals Secrets' values before they are appended and opens
	// them for output (secrets.go); nil refuses Secrets with values.
	Sealer *seal.Sealer
	// Limits bound each token's requests, watches and page sizes (limits.go).
	Limits Limits
	// Reconciler names what reconciles objects of kind ("" when nothing
	// does: they are stored only); nil means nothing reconciles any kind.
	Reconciler func(kind string) string
	// Defined is the catalog of kinds defined by CustomResourceDefinitions
	// in effect (gate.KindCheck.Catalog): names resolve against it and
	// /v1/kinds lists its kinds with their printer columns. Nil: none.
	Defined func() *crd.Catalog
	// Version describes the server for GET /v1/version.
	Version Version
	// Console serves the web console at /; nil serves none.
	Console http.Handler
	// Partitions reports which instance holds each partition of the
	// reconcilers' key space; nil when unknown.
	Partitions func(ctx context.Context) (map[int]string, error)
	// Registerer receives the API's metrics; Gatherer serves /metrics.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	Logger     *slog.Logger
	// Pods serves images and pod logs; nil leaves those routes out.
	Pods Pods
	// Integrity verifies the stored log (verify.go); nil answers 501.
	Integrity Integrity
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	reqs    *prometheus.CounterVec
	latency *prometheus.HistogramVec

	// Who may do what, and how much (authz.go, limits.go).
	tokens    *tokens
	limits    *limiter
	limitsCfg Limits
	// controllers holds one principal per controller credential that
	// authenticated (name → *Principal), so that its limits are its own
	// across requests.
	controllers sync.Map
	// stateSt is the state last rebuilt for GET /v1/state, at stateSeq;
	// stateMu also lets one rebuild run at a time.
	stateMu  sync.Mutex
	stateSt  *projections.Store
	stateSeq uint64
	// streams ends with the server's shutdown (ConfigureServer).
	streams      context.Context
	closeStreams context.CancelFunc
}

// New validates cfg and builds the handler.
func New(cfg Config) (*Server, error) {
	if cfg.Gate == nil || cfg.Store == nil || cfg.Log == nil {
		return nil, errors.New("api: gate, store and log are required")
	}
	if cfg.Ready == nil {
		cfg.Ready = func() error { return nil }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		reg := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	ps := slices.Clone(cfg.Principals)
	for tok, name := range cfg.Tokens {
		ps = append(ps, Principal{Token: tok, Name: name, Role: RoleAdmin})
	}
	toks, err := newTokens(ps)
	if err != nil {
		return nil, err
	}
	lim := cfg.Limits.withDefaults()
	s := &Server{cfg: cfg, tokens: toks, limits: newLimiter(lim), limitsCfg: lim, mux: http.NewServeMux()}
	s.streams, s.closeStreams = context.WithCancel(context.Background())
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetplane_api_requests_total", Help: "API requests by route and status code.",
	}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "jetplane_api_request_seconds", Help: "API request duration by route (watch excluded).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"route"})
	for _, c := range []prometheus.Collector{s.reqs, s.latency} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("api metrics: %w", err)
		}
	}
	s.route("POST /v1/apply", s.apply)
	s.route("GET /v1/objects", s.list)
	s.route("GET /v1/object", s.get)
	s.route("DELETE /v1/object", s.delete)
	s.route("GET /v1/history", s.history)
	s.route("GET /v1/state", s.state)
	s.route("GET /v1/watch", s.watch)
	s.route("GET /v1/subscribe", s.subscribe)
	s.route("GET /v1/clusters", s.clusters)
	s.routeCLI()
	s.podRoutes()
	s.route("PUT /v1/charts/{name}/{version}", s.putChart)
	s.route("GET /v1/backup", s.backup)
	s.route("GET /v1/verify", s.verify)
	s.route("GET /v1/checkpoints", s.checkpoints)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route: answer 404 or 405 in JSON like every other error.
		s.noRoute(w, r)
		return
	}
	if !strings.Contains(pattern, "{") {
		// A pattern without wildcards binds no path values: the handler
		// found is served as the mux would serve it, without matching
		// the request a second time.
		r.Pattern = pattern
		h.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

type handler func(w http.ResponseWriter, r *http.Request, actor string) error

// statusWriter remembers the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) route(pattern string, h handler) {
	name := pattern[strings.Index(pattern, " ")+1:]
	// The route's own series, looked up once on first use (not at
	// registration, which would export a zero series for every route):
	// a lookup hashes the labels, and nearly every request is a 200.
	var (
		okOnce, latencyOnce sync.Once
		ok                  prometheus.Counter
		latency             prometheus.Observer
	)
	okSeries := func() { ok = s.reqs.WithLabelValues(name, "200") }
	latencySeries := func() { latency = s.latency.WithLabelValues(name) }
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		p, err := s.authenticate(r)
		if err == nil {
			err = authorize(p, pattern, r)
		}
		// Parsed once for the checks and the handler (each parse of
		// r.URL.Query() is a new map).
		q := r.URL.Query()
		if err == nil {
			err = authorizeSecrets(p, q)
		}
		if err == nil {
			var release func()
			// A followed log is held open like a watch and counts as one.
			long := pattern == "GET /v1/watch" || pattern == "GET /v1/subscribe" || (pattern == "GET /v1/logs" && r.URL.Query().Get("follow") == "true")
			if release, err = s.limits.admit(p, long); err == nil {
				defer release()
				if long {
					var stop func()
					r, stop = s.whileTokenHolds(r, p)
					defer stop()
				}
			} else if le := (*limited)(nil); errors.As(err, &le) {
				err = writeLimited(sw, le)
			}
		}
		if err == nil {
			if ready := s.cfg.Ready(); ready != nil && name != "/v1/history" && name != "/v1/clusters" && name != "/v1/version" && name != "/v1/verify" && name != "/v1/checkpoints" {
				err = httpError(http.StatusServiceUnavailable, "not ready: "+ready.Error())
			} else if err = s.resolveKind(r, q, name); err == nil {
				err = h(sw, r.WithContext(withRequest(r.Context(), p, q)), "user/"+p.Name)
			}
		}
		if err != nil {
			s.writeError(sw, r, err)
		}
		if sw.code == http.StatusOK {
			okOnce.Do(okSeries)
			ok.Inc()
		} else {
			s.reqs.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		}
		if name != "/v1/watch" && name != "/v1/subscribe" {
			latencyOnce.Do(latencySeries)
			latency.Observe(time.Since(start).Seconds())
		}
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Ready(); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

type statusError struct {
	code    int
	msg     string
	details []ErrorDetail
}

func (e *statusError) Error() string { return e.msg }

func httpError(code int, msg string) error { return &statusError{code: code, msg: msg} }

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	resp := ErrorResponse{Error: err.Error()}
	code := http.StatusInternalServerError
	var se *statusError
	var merrs manifest.Errors
	var merr *manifest.Error
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &se):
		code, resp.Details = se.code, se.details
	case errors.As(err, &merrs):
		code = http.StatusBadRequest
		for _, e := range merrs {
			resp.Details = append(resp.Details, detail(e))
		}
	case errors.As(err, &merr):
		code = http.StatusBadRequest
		resp.Details = []ErrorDetail{detail(merr)}
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		resp.Error = fmt.Sprintf("request body is over %d bytes; split the manifests into several applies", tooBig.Limit)
	case errors.Is(err, gate.ErrTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, gate.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, gate.ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, gate.ErrAdoption):
		code = http.StatusConflict
	case errors.Is(err, gate.ErrIdempotencyMismatch):
		code = http.StatusUnprocessableEntity
	case errors.Is(err, gate.ErrNotFound), errors.Is(err, events.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, events.ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, projections.ErrGone):
		code = http.StatusGone
	case errors.Is(err, projections.ErrCatchingUp):
		code = http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = http.StatusServiceUnavailable
	}
	if code >= 500 {
		s.cfg.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}

func detail(e *manifest.Error) ErrorDetail {
	return ErrorDetail{Source: e.Source, Document: e.Doc, Field: e.Field, Reason: e.Reason}
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request, _ string) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return bodyError(err)
	}
	query := queryOf(r)
	source := query.Get("source")
	if source == "" {
		source = "request body"
	}
	objs, err := manifest.Decode(source, body)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return httpError(http.StatusBadRequest, "no objects in the request body; send one or more manifests (YAML or JSON)")
	}
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	// The gate authorizes and seals (decision 0037), and refuses more
	// objects than one atomic write holds.
	p := principalOf(r.Context()).gate()
	var outcomes []gate.Outcome
	if query.Get("dryRun") == "true" {
		outcomes, err = s.cfg.Gate.DryRun(r.Context(), p, objs)
	} else {
		outcomes, err = s.cfg.Gate.Apply(r.Context(), p, objs, idem)
	}
	if err != nil {
		return err
	}
	// "Prefer: return=minimal" (RFC 7240) asks for the brief answer bulk
	// clients want: key, action and resourceVersion, not every object
	// written out again.
	brief := preferMinimal(r.Header.Values("Prefer"))
	resp := ApplyResponse{Results: make([]ApplyResult, len(outcomes))}
	for _, o := range outcomes {
		resp.Warnings = append(resp.Warnings, o.Warnings...)
	}
	setWarnings(w, resp.Warnings)
	for i, o := range outcomes {
		resp.Results[i] = ApplyResult{Key: wireKey(o.Key), Action: string(o.Action)}
		if brief {
			resp.Results[i].ResourceVersion = o.Object.GetMetadata().GetResourceVersion()
			w.Header().Set("Preference-Applied", "return=minimal")
		} else {
			resp.Results[i].Object = rawObject(s.show(r, o.Object))
			resp.Results[i].Previous = rawObject(s.show(r, o.Previous))
		}
	}
	return writeJSON(w, resp)
}

// bodyError is a failure to read a request's body: a client too slow for
// the read timeout is answered 408, not logged as the server's failure.
func bodyError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return httpError(http.StatusRequestTimeout, "the request body did not arrive within the server's read timeout")
	}
	return err
}

// preferMinimal reports whether Prefer headers ask for return=minimal.
func preferMinimal(prefer []string) bool {
	for _, h := range prefer {
		for _, p := range strings.Split(h, ",") {
			if strings.EqualFold(strings.TrimSpace(strings.SplitN(p, ";", 2)[0]), "return=minimal") {
				return true
			}
		}
	}
	return false
}

func wireKey(k projections.Key) Key { return Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name} }

func keyParam(r *http.Request) (projections.Key, error) {
	q := r.URL.Query()
	k := projections.Key{Kind: q.Get("kind"), Namespace: q.Get("namespace"), Name: q.Get("name")}
	if k.Kind == "" || k.Name == "" {
		return k, httpError(http.StatusBadRequest, "query parameters kind and name are required (namespace too, for namespaced objects)")
	}
	return k, nil
}

func queryParam(r *http.Request) (projections.Query, error) {
	q := r.URL.Query()
	sel, err := projections.ParseSelector(q.Get("labelSelector"))
	if err != nil {
		return projections.Query{}, httpError(http.StatusBadRequest, err.Error())
	}
	return projections.Query{Kind: q.Get("kind"), Namespace: q.Get("namespace"), Group: q.Get("group"), Labels: sel}, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, _ string) error {
	k, err := keyParam(r)
	if err != nil {
		return err
	}
	o := s.cfg.Store.Get(k)
	if o == nil && !strings.Contains(k.Kind, ".") {
		// A bare kind names the kind in any group, when only one matches.
		objs, _ := s.cfg.Store.List(projections.Query{Kind: k.Kind, Namespace: k.Namespace})
		var found []*schemas.Object
		for _, c := range objs {
			if c.GetMetadata().GetName() == k.Name && c.GetMetadata().GetNamespace() == k.Namespace {
				found = append(found, c)
			}
		}
		if len(found) > 1 {
			return httpError(http.StatusBadRequest, fmt.Sprintf("kind %q matches %d groups; name the group, such as %s.apps", k.Kind, len(found), k.Kind))
		}
		if len(found) == 1 {
			o = found[0]
		}
	}
	if o == nil {
		return httpError(http.StatusNotFound, fmt.Sprintf("%s not found", k))
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(rawObject(s.show(r, s.withNextRun(o))))
	return err
}

// withNextRun returns o with the runtime's next run time of its key, if
// the runtime knows one (o itself, shared with the store, is not changed).
func (s *Server) withNextRun(o *schemas.Object) *schemas.Object {
	if s.cfg.NextRun == nil {
		return o
	}
	t, ok := s.cfg.NextRun(projections.ObjectKey(o))
	if !ok {
		return o
	}
	c := &schemas.Object{ApiVersion: o.ApiVersion, Kind: o.Kind, Metadata: o.Metadata, Spec: o.Spec, Status: proto.Clone(o.GetStatus()).(*schemas.Status)}
	c.Status.NextRunTime = timestamppb.New(t)
	return c
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ string) error {
	q, err := queryParam(r)
	if err != nil {
		return err
	}
	fs, err := fieldParam(r)
	if err != nil {
		return err
	}
	objs, seq, next, err := s.listPage(r, q)
	if err != nil {
		return err
	}
	objs = fs.filter(objs)
	for i, o := range objs {
		objs[i] = s.withNextRun(o)
	}
	resp := listResponse(s.showAll(r, objs), seq)
	resp.Continue = next
	return writeJSON(w, resp)
}

func listResponse(objs []*schemas.Object, seq uint64) ListResponse {
	resp := ListResponse{ResourceVersion: seq, Items: make([]json.RawMessage, len(objs))}
	for i, o := range objs {
		resp.Items[i] = rawObject(o)
	}
	return resp
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, actor string) error {
	k, err := keyParam(r)
	if err != nil {
		return err
	}
	cascade := r.URL.Query().Get("cascade")
	if k.Kind == "Namespace" && k.Namespace == "" && cascade != "orphan" {
		return s.deleteNamespace(w, r, actor, k)
	}
	// ?cascade= is what deleting an owner does to its dependents
	// (background, foreground or orphan; decision 0071).
	prop, err := gate.ParsePropagation(cascade)
	if err != nil {
		return httpError(http.StatusBadRequest, "cascade: "+err.Error())
	}
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	out, err := s.cfg.Gate.DeleteWith(r.Context(), principalOf(r.Context()).gate(), k, idem, prop)
	purge := r.URL.Query().Get(purgeParam) == "true"
	if purge && (err == nil || errors.Is(err, gate.ErrNotFound)) {
		// A secret deleted long ago may still need forgetting.
		if err := s.shred(r.Context(), k.Kind, k.Namespace, k.Name); err != nil {
			return err
		}
		if err != nil {
			return writeJSON(w, ApplyResponse{Results: []ApplyResult{{Key: wireKey(k), Action: "shredded"}}})
		}
	}
	if err != nil {
		return err
	}
	return writeJSON(w, ApplyResponse{Results: []ApplyResult{{Key: wireKey(out.Key), Action: string(out.Action), Object: rawObject(s.show(r, out.Object))}}})
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, _ string) error {
	k, err := keyParam(r)
	if err != nil {
		return err
	}
	limit, err := s.pageLimit(r)
	if err != nil {
		return err
	}
	var after uint64
	if tok := r.URL.Query().Get("continue"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			return err
		}
		after = c.Seq
	}
	// A page ends at limit events or PageBytes of them, whichever comes
	// first: only the page is read, so a history of large objects costs
	// a page's memory, not the history's.
	evs, more, err := s.cfg.Log.HistoryPage(r.Context(), k.Proto(), after, limit, s.limitsCfg.PageBytes)
	if err != nil {
		return err
	}
	if len(evs) == 0 && after == 0 {
		return httpError(http.StatusNotFound, fmt.Sprintf("%s has no history", k))
	}
	resp := HistoryResponse{Events: make([]json.RawMessage, len(evs))}
	if more && len(evs) > 0 {
		resp.Continue = encodeCursor(cursor{Seq: evs[len(evs)-1].GetSequence()})
	}
	for i, ev := range evs {
		resp.Events[i] = rawEvent(s.showEvent(r, ev))
	}
	return writeJSON(w, resp)
}

// state answers the state as of ?at=SEQ or ?at=RFC3339-time, in pages
// like a list (?limit=, ?continue=). A continue token carries the
// sequence, so every page is of the same state; the state rebuilt for one
// page is kept for the next.
func (s *Server) state(w http.ResponseWriter, r *http.Request, _ string) error {
	at := r.URL.Query().Get("at")
	q, err := queryParam(r)
	if err != nil {
		return err
	}
	var seq uint64
	if tok := r.URL.Query().Get("continue"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			return err
		}
		seq = c.Seq
	} else if n, err := strconv.ParseUint(at, 10, 64); err == nil {
		seq = n
	} else if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		if seq, err = s.cfg.Log.SequenceAt(r.Context(), t); err != nil {
			return err
		}
	} else {
		return httpError(http.StatusBadRequest, fmt.Sprintf("at: %q is neither a sequence number nor an RFC 3339 time (such as 2026-01-02T15:04:05Z)", at))
	}
	head := s.cfg.Store.Seq()
	if seq > head {
		return httpError(http.StatusBadRequest, fmt.Sprintf("at: sequence %d is past the newest event (%d)", seq, head))
	}
	fs, err := fieldParam(r)
	if err != nil {
		return err
	}
	st, err := s.stateAt(r.Context(), seq)
	if err != nil {
		return err
	}
	keys, _ := st.Keys(q)
	page, next, err := s.pageKeys(r, keys)
	if err != nil {
		return err
	}
	objs := make([]*schemas.Object, 0, len(page))
	for _, k := range page {
		if o := st.Get(k); o != nil {
			objs = append(objs, o)
		}
	}
	resp := listResponse(s.showAll(r, fs.filter(objs)), seq)
	if next != "" {
		c, _ := decodeCursor(next)
		c.Seq = seq
		resp.Continue = encodeCursor(c)
	}
	return writeJSON(w, resp)
}

// stateAt rebuilds the state at seq, or returns the one rebuilt last when
// it is of the same sequence (the pages of one state).
func (s *Server) stateAt(ctx context.Context, seq uint64) (*projections.Store, error) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.stateSt != nil && s.stateSeq == seq {
		return s.stateSt, nil
	}
	st, err := projections.StateAt(ctx, s.cfg.Log, s.cfg.Blobs, seq)
	if err != nil {
		return nil, err
	}
	s.stateSt, s.stateSeq = st, seq
	return st, nil
}

// clusters lists the watched Kubernetes clusters. It answers while the
// server is not ready: it is how one finds out why.
func (s *Server) clusters(w http.ResponseWriter, _ *http.Request, _ string) error {
	resp := ClustersResponse{Clusters: []Cluster{}}
	if s.cfg.Clusters != nil {
		resp.Clusters = s.cfg.Clusters()
	}
	return writeJSON(w, resp)
}

// watch streams changes as server-sent events: "event: <TYPE>", "id: <seq>",
// "data: <WatchEvent JSON>". A client resumes with ?resourceVersion= or the
// Last-Event-ID header.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, _ string) error {
	q, err := queryParam(r)
	if err != nil {
		return err
	}
	var from uint64
	rv := r.URL.Query().Get("resourceVersion")
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		rv = last
	}
	if rv != "" {
		if from, err = strconv.ParseUint(rv, 10, 64); err != nil {
			return httpError(http.StatusBadRequest, fmt.Sprintf("resourceVersion: %q is not a sequence number", rv))
		}
	}
	fs, err := fieldParam(r)
	if err != nil {
		return err
	}
	// The current objects first, oldest change first, each with its own
	// resourceVersion as its id (see byResourceVersion), then the changes
	// after the list.
	var initial []*schemas.Object
	if from == 0 {
		initial, from = s.cfg.Store.List(q)
		initial = fs.filter(initial)
		byResourceVersion(initial)
	}
	changes, stop, err := s.cfg.Store.Watch(q, from)
	if err != nil {
		return err
	}
	defer stop()
	ctx, release := s.stream(w, r)
	defer release()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	for _, o := range initial {
		k, rv := projections.ObjectKey(o), o.GetMetadata().GetResourceVersion()
		data, _ := json.Marshal(WatchEvent{Type: string(projections.Added), ResourceVersion: rv, Key: wireKey(k), Object: rawObject(s.show(r, o))})
		if _, err := fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", projections.Added, rv, data); err != nil {
			return nil
		}
	}
	if flusher != nil && len(initial) > 0 {
		flusher.Flush()
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-keepalive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return nil
			}
		case c, ok := <-changes:
			if !ok {
				// Fell behind: end the stream; the client resumes from the
				// last id it saw.
				return nil
			}
			if !fs.matches(c.Object) {
				continue
			}
			data, _ := json.Marshal(WatchEvent{Type: string(c.Type), ResourceVersion: c.Sequence, Key: wireKey(c.Key), Object: rawObject(s.show(r, c.Object))})
			if _, err := fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", c.Type, c.Sequence, data); err != nil {
				return nil
			}
		}
		if flusher != nil && len(changes) == 0 {
			flusher.Flush()
		}
	}
}
