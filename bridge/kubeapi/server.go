package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// Caller is who sends a request, as the server's authentication found.
type Caller struct {
	Principal gate.Principal
	// SeeSecrets lets the caller read Secrets' values in clear; others
	// read them masked.
	SeeSecrets bool
}

// History reads past state for ?asOf= (projections.StateAt over the log).
type History interface {
	// StateAt returns the state as of sequence seq.
	StateAt(ctx context.Context, seq uint64) (*projections.Store, error)
	// SequenceAt returns the sequence current at time t.
	SequenceAt(ctx context.Context, t time.Time) (uint64, error)
}

// Config configures a Server.
type Config struct {
	Gate  *gate.Gate
	Store *projections.Store
	// Authenticate finds the caller of a request; an error is answered
	// 401. Required.
	Authenticate func(r *http.Request) (Caller, error)
	// Defined is the catalog of kinds defined by CustomResourceDefinitions
	// in effect; nil: none.
	Defined func() *crd.Catalog
	// Sealer opens Secrets for callers that may see them; nil masks them.
	Sealer *seal.Sealer
	// Log lets a watch resume from a resourceVersion older than the
	// projection's window (after a restart, or on another instance); nil:
	// such a watch is answered 410 Gone and the client relists.
	Log Log
	// History answers ?asOf= reads; nil refuses them.
	History History
	// Version is the server's version for /version.
	Version string
	Logger  *slog.Logger
}

// Server serves the Kubernetes API. It is an http.Handler for the paths
// /api, /api/..., /apis, /apis/... and /version.
type Server struct {
	cfg Config
	fms fieldManagers
	// cat is the catalog built for the defined kinds last seen: built
	// again only when the CustomResourceDefinitions in effect change (the
	// kinds' catalog is then a new one), not on every request.
	cat atomic.Pointer[servedCatalog]
	// workers run requests other than watches (nil: on the request's own
	// goroutine).
	workers *workers
}

type servedCatalog struct {
	defined *crd.Catalog
	cat     *catalog
}

// served is the catalog of the resources served now.
func (s *Server) served() *catalog {
	defined := s.defined()
	if c := s.cat.Load(); c != nil && c.defined == defined {
		return c.cat
	}
	c := &servedCatalog{defined: defined, cat: newCatalog(defined)}
	s.cat.Store(c)
	return c.cat
}

// New validates cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Gate == nil || cfg.Store == nil || cfg.Authenticate == nil {
		return nil, errors.New("kubeapi: gate, store and authenticate are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, workers: newWorkers()}, nil
}

// Paths are the path patterns (net/http.ServeMux) the server answers.
var Paths = []string{"/api", "/api/", "/apis", "/apis/", "/version", "/openapi/"}

var errBadRequest = errors.New("bad request")

// request is one API request, parsed from its path.
type request struct {
	r         *http.Request
	caller    Caller
	cat       *catalog
	res       resource
	namespace string
	name      string
	sub       string
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, err := s.cfg.Authenticate(r)
	if err != nil {
		writeStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	if s.workers == nil || mayWatch(r) {
		// A watch lasts: it keeps its own goroutine.
		s.serveOrFail(w, r, caller)
		return
	}
	s.workers.run(func() { s.serveOrFail(w, r, caller) })
}

func (s *Server) serveOrFail(w http.ResponseWriter, r *http.Request, caller Caller) {
	if err := s.serve(w, r, caller); err != nil {
		s.writeError(w, r, err)
	}
}

// mayWatch reports whether r may be a watch (?watch=, or a path under
// /watch/); it need not be one.
func mayWatch(r *http.Request) bool {
	return strings.Contains(r.URL.RawQuery, "watch") || strings.Contains(r.URL.Path, "/watch/")
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, caller Caller) error {
	path := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(path, "/")
	cat := s.served()
	switch {
	case path == "version":
		// The Kubernetes version is the one whose clients are tested against
		// this API; jetplane's own version is in GitCommit.
		return writeJSON(w, http.StatusOK, version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.0+jetplane",
			GitCommit: s.cfg.Version, Platform: "jetplane"})
	case path == "api":
		return writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case path == "apis":
		return writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: cat.groups()})
	case len(parts) >= 2 && parts[0] == "openapi" && parts[1] == "v3":
		return s.openapi(w, r, cat, path)
	case parts[0] == "openapi":
		return apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, path)
	}
	var group, ver string
	var rest []string
	switch {
	case parts[0] == "api" && len(parts) >= 2:
		ver, rest = parts[1], parts[2:]
	case parts[0] == "apis" && len(parts) == 2:
		for _, g := range cat.groups() {
			if g.Name == parts[1] {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				return writeJSON(w, http.StatusOK, &g)
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "groups"}, parts[1])
	case parts[0] == "apis" && len(parts) >= 3:
		group, ver, rest = parts[1], parts[2], parts[3:]
	default:
		return apierrors.NewNotFound(schema.GroupResource{}, path)
	}
	if len(rest) == 0 {
		l, ok := cat.resources(group, ver)
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Group: group}, ver)
		}
		return writeJSON(w, http.StatusOK, l)
	}
	q := &request{r: r, caller: caller, cat: cat}
	watchPath := false
	if rest[0] == "watch" {
		// The old form: /api/v1/watch/namespaces/NS/pods.
		watchPath, rest = true, rest[1:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		q.namespace, rest = rest[1], rest[2:]
	}
	res, ok := cat.find(group, ver, rest[0])
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: rest[0]}, "")
	}
	q.res = res
	if len(rest) > 1 {
		q.name = rest[1]
	}
	if !res.namespaced && q.namespace != "" {
		return apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: res.plural}, q.name)
	}
	if len(rest) > 2 {
		q.sub = strings.Join(rest[2:], "/")
		return s.subresource(w, q)
	}
	watch := watchPath || r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
	switch {
	case r.Method == http.MethodGet && watch:
		return s.watch(w, q)
	case r.Method == http.MethodGet && q.name == "":
		return s.list(w, q)
	case r.Method == http.MethodGet:
		return s.get(w, q)
	case r.Method == http.MethodPost && q.name == "":
		return s.create(w, q)
	case r.Method == http.MethodPut && q.name != "":
		return s.update(w, q)
	case r.Method == http.MethodPatch && q.name != "":
		return s.patch(w, q)
	case r.Method == http.MethodDelete && q.name != "":
		return s.delete(w, q)
	}
	return apierrors.NewMethodNotSupported(schema.GroupResource{Group: group, Resource: res.plural}, r.Method)
}

func (s *Server) defined() *crd.Catalog {
	if s.cfg.Defined == nil {
		return nil
	}
	return s.cfg.Defined()
}

// key is the object key the request names.
func (q *request) key() projections.Key {
	return projections.Key{Kind: q.res.key(), Namespace: q.namespace, Name: q.name}
}

func (q *request) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: q.res.group, Resource: q.res.plural}
}

// show is o as the caller may see it, in Kubernetes' shape.
func (s *Server) show(q *request, o *schemas.Object) map[string]any {
	if seal.Holds(o) {
		if q.caller.SeeSecrets && s.cfg.Sealer != nil {
			o = s.cfg.Sealer.Reveal(q.r.Context(), o)
		} else {
			o = seal.Mask(o)
		}
	}
	return s.withOwnerReferences(kubeObject(o, q.res.version), o)
}

// writeError answers err as a Kubernetes Status.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var st apierrors.APIStatus
	var merrs manifest.Errors
	var merr *manifest.Error
	switch {
	case errors.As(err, &st):
	case errors.As(err, &merrs), errors.As(err, &merr), errors.Is(err, errBadRequest), errors.Is(err, gate.ErrInvalid):
		st = apierrors.NewBadRequest(err.Error())
	case errors.Is(err, gate.ErrForbidden):
		st = apierrors.NewForbidden(schema.GroupResource{}, "", err)
	case errors.Is(err, gate.ErrAdoption), errors.Is(err, events.ErrConflict):
		st = apierrors.NewConflict(schema.GroupResource{}, "", err)
	case errors.Is(err, gate.ErrTooLarge):
		st = apierrors.NewRequestEntityTooLargeError(err.Error())
	case errors.Is(err, gate.ErrNotFound), errors.Is(err, events.ErrNotFound):
		st = apierrors.NewNotFound(schema.GroupResource{}, "")
	case errors.Is(err, projections.ErrGone):
		st = apierrors.NewResourceExpired(err.Error())
	case errors.Is(err, projections.ErrCatchingUp), errors.Is(err, context.DeadlineExceeded):
		st = apierrors.NewServiceUnavailable(err.Error())
	default:
		s.cfg.Logger.Error("kubernetes api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		st = apierrors.NewInternalError(err)
	}
	writeStatus(w, st)
}

func writeStatus(w http.ResponseWriter, st apierrors.APIStatus) {
	s := st.Status()
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	_ = writeJSON(w, int(s.Code), &s)
}

func writeJSON(w http.ResponseWriter, code int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if m, ok := v.(map[string]any); ok {
		// An object shown: encoded without reflection, as json.Encoder
		// would (and ended with its newline).
		b, err := jsonvalue.Marshal(m)
		if err != nil {
			return err
		}
		w.WriteHeader(code)
		_, err = w.Write(append(b, '\n'))
		return err
	}
	w.WriteHeader(code)
	return json.NewEncoder(w).Encode(v)
}
