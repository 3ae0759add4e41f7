package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
)

// Role is what an API token may do.
type Role string

const (
	// RoleAdmin may do everything, including reading secret values.
	RoleAdmin Role = "admin"
	// RoleWriter may apply and delete, and read.
	RoleWriter Role = "writer"
	// RoleReader may get, list, watch, and read history and past state.
	RoleReader Role = "reader"
	// RoleController is a controller credential's process, which
	// authenticates with a token signed by its credential (Config.
	// ControllerToken) and never with a token of the token file: it reads,
	// and records the status of its kinds' objects (gate.Authorize).
	RoleController Role = "controller"
)

// ParseRole parses a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleWriter, RoleReader:
		return r, nil
	}
	return "", fmt.Errorf("role %q: use admin, writer or reader", s)
}

// Principal is the holder of an API token.
type Principal struct {
	// Token is the bearer token. Required.
	Token string
	// Name is the user, recorded in events as user/<name>. Required.
	Name string
	// Role is what the token may do; empty is RoleAdmin.
	Role Role
	// Namespaces confines the token to these namespaces; empty allows
	// every namespace and cluster-scoped objects.
	Namespaces []string
	// ShowSecrets lets a reader or writer see secret values; admins
	// always may.
	ShowSecrets bool
}

// may reports whether p's role allows verb.
func (p *Principal) may(v verb) bool {
	switch p.Role {
	case RoleAdmin, "":
		return true
	case RoleWriter:
		return v == verbRead || v == verbWrite
	case RoleReader, RoleController:
		return v == verbRead
	}
	return false
}

// inScope reports whether p may act in namespace ns ("" is cluster-scoped).
func (p *Principal) inScope(ns string) bool {
	return len(p.Namespaces) == 0 || (ns != "" && slices.Contains(p.Namespaces, ns))
}

// CanSeeSecrets reports whether p may read secret values in clear.
func (p *Principal) CanSeeSecrets() bool {
	return p.Role == RoleAdmin || p.Role == "" || p.ShowSecrets
}

type verb int

const (
	verbRead verb = iota
	verbWrite
	verbAdmin
)

// routeVerbs is what each route needs. A route not listed needs read
// when its method is GET or HEAD and write otherwise; list a route here
// when it needs more (verbAdmin).
var routeVerbs = map[string]verb{
	"POST /v1/apply":    verbWrite,
	"DELETE /v1/object": verbWrite,
	"GET /v1/objects":   verbRead,
	"GET /v1/object":    verbRead,
	"GET /v1/watch":     verbRead,
	"GET /v1/subscribe": verbRead,
	"GET /v1/history":   verbRead,
	"GET /v1/state":     verbRead,
	"GET /v1/clusters":  verbRead,
	// A backup is the whole log, sealed secrets and all: admins only.
	"GET /v1/backup": verbAdmin,
}

// anonymous acts for every request when the server has no tokens.
var anonymous = &Principal{Name: "anonymous", Role: RoleAdmin}

// tokens holds the digests of the configured tokens: every request
// compares its token's digest against all of them in constant time, so
// neither the match nor its position leaks through timing.
type tokens struct {
	digests [][sha256.Size]byte
	ps      []*Principal
}

func newTokens(ps []Principal) (*tokens, error) {
	t := &tokens{}
	seen := map[string]bool{}
	for i := range ps {
		p := ps[i]
		if p.Token == "" || p.Name == "" {
			return nil, fmt.Errorf("api: token %d: token and name are required", i+1)
		}
		if seen[p.Token] {
			return nil, fmt.Errorf("api: token of %s: given twice", p.Name)
		}
		seen[p.Token] = true
		if p.Role == "" {
			p.Role = RoleAdmin
		}
		if _, err := ParseRole(string(p.Role)); err != nil {
			return nil, fmt.Errorf("api: token of %s: %w", p.Name, err)
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(p.Token)))
		t.ps = append(t.ps, &p)
	}
	return t, nil
}

func (t *tokens) lookup(token string) *Principal {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return t.ps[found]
}

// authenticate finds the request's principal: 401 without a known token.
func (s *Server) authenticate(r *http.Request) (*Principal, error) {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if found && s.cfg.ControllerToken != nil {
		// A controller's token is its own, open API or not: it acts as
		// that controller, never as anonymous.
		name, err := s.cfg.ControllerToken(tok)
		if errors.Is(err, ErrTokenUnchecked) {
			return nil, httpError(http.StatusServiceUnavailable, err.Error()+"; retry")
		}
		if err != nil {
			return nil, httpError(http.StatusUnauthorized, err.Error())
		}
		if name != "" {
			p, _ := s.controllers.LoadOrStore(name, &Principal{Name: name, Role: RoleController})
			return p.(*Principal), nil
		}
	}
	if len(s.tokens.ps) == 0 {
		return anonymous, nil
	}
	if !found {
		return nil, httpError(http.StatusUnauthorized, "missing bearer token; pass one with --token or JETPLANE_TOKEN")
	}
	p := s.tokens.lookup(tok)
	if p == nil {
		return nil, httpError(http.StatusUnauthorized, "unknown bearer token; pass a valid one with --token or JETPLANE_TOKEN")
	}
	return p, nil
}

// ErrTokenUnchecked marks an error of Config.ControllerToken that is no
// refusal: the credentials could not be read to check the token.
var ErrTokenUnchecked = errors.New("controller token could not be checked")

// tokenRecheck is how often a request held open with a controller token
// (a watch, a subscription, a followed log) checks the token again, and
// tokenUncheckedFor how long it may go on while the token cannot be
// checked (the credentials file unreadable) before it ends all the same.
var (
	tokenRecheck      = time.Second
	tokenUncheckedFor = 30 * time.Second
)

// whileTokenHolds returns r with a context that ends once the controller
// token it was authenticated with stops holding (it expired, or its
// credential was revoked): a stream opened with a token lasts no longer
// than the token, as every request made with it after does. Requests of
// other principals are returned as they are; stop releases the check.
// A check that cannot read the credentials keeps the stream open, for
// tokenUncheckedFor at most: a moment's read error does not end every
// controller's watch, and a lasting one does not outlive a revocation.
func (s *Server) whileTokenHolds(r *http.Request, p *Principal) (_ *http.Request, stop func()) {
	if p.Role != RoleController || s.cfg.ControllerToken == nil {
		return r, func() {}
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	ctx, cancel := context.WithCancelCause(r.Context())
	var (
		mu        sync.Mutex
		t         *time.Timer
		stopped   bool
		unchecked time.Time // since when checks could not read the credentials
	)
	check := func() {
		_, err := s.cfg.ControllerToken(tok)
		switch {
		case err == nil:
			unchecked = time.Time{}
		case !errors.Is(err, ErrTokenUnchecked):
			cancel(err)
			return
		case unchecked.IsZero():
			unchecked = time.Now()
		case time.Since(unchecked) >= tokenUncheckedFor:
			cancel(err)
			return
		}
		mu.Lock()
		if !stopped {
			t.Reset(tokenRecheck)
		}
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(tokenRecheck, check)
	mu.Unlock()
	return r.WithContext(ctx), func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(nil)
	}
}

// authorize checks p may call pattern with the request's namespace: 403
// otherwise. Apply checks each object's namespace once it has decoded
// the body (authorizeObjects).
func authorize(p *Principal, pattern string, r *http.Request) error {
	v, ok := routeVerbs[pattern]
	if !ok {
		v = verbWrite
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			v = verbRead
		}
	}
	if !p.may(v) {
		return httpError(http.StatusForbidden, fmt.Sprintf("%s (role %s) may not %s", p.Name, p.Role, pattern))
	}
	switch {
	case len(p.Namespaces) == 0, pattern == "POST /v1/apply", pattern == "GET /v1/version", pattern == "GET /v1/subscribe":
		// The gate checks each object's namespace once decoded; the
		// version tells nothing of any namespace; subscribe checks its
		// namespaces= list against the token's.
		return nil
	case pattern == "POST /v1/images", pattern == "DELETE /v1/images", pattern == "PUT /v1/charts/{name}/{version}":
		// Images and charts are not in a namespace: their handlers ask
		// the gate's rules about the name (authorizeArtifact).
		return nil
	}
	if pattern == "GET /v1/clusters" {
		return httpError(http.StatusForbidden, fmt.Sprintf("%s is confined to namespaces %s; clusters need an unconfined token", p.Name, strings.Join(p.Namespaces, ",")))
	}
	ns := r.URL.Query().Get("namespace")
	if !p.inScope(ns) {
		if ns == "" {
			return httpError(http.StatusForbidden, fmt.Sprintf("%s is confined to namespaces %s; name one with namespace=", p.Name, strings.Join(p.Namespaces, ",")))
		}
		return httpError(http.StatusForbidden, fmt.Sprintf("%s may not act in namespace %q", p.Name, ns))
	}
	return nil
}

type requestKey struct{}

// requestInfo is what route learned of a request before its handler:
// who sends it and its query, parsed once.
type requestInfo struct {
	p *Principal
	q url.Values
}

func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, requestKey{}, &requestInfo{p: p})
}

// withRequest is ctx with the request's principal and its parsed query
// (q must stay in step with the request's URL).
func withRequest(ctx context.Context, p *Principal, q url.Values) context.Context {
	return context.WithValue(ctx, requestKey{}, &requestInfo{p: p, q: q})
}

// principalOf is the request's principal (anonymous when none was set).
func principalOf(ctx context.Context) *Principal {
	if ri, ok := ctx.Value(requestKey{}).(*requestInfo); ok && ri.p != nil {
		return ri.p
	}
	return anonymous
}

// queryOf is r's query, parsed once by route when it went through route.
func queryOf(r *http.Request) url.Values {
	if ri, ok := r.Context().Value(requestKey{}).(*requestInfo); ok && ri.q != nil {
		return ri.q
	}
	return r.URL.Query()
}

// gate is p as the gate knows it: user/<name>, its role and namespaces.
func (p *Principal) gate() gate.Principal {
	role := gate.RoleAdmin
	switch p.Role {
	case RoleWriter:
		role = gate.RoleWriter
	case RoleReader:
		role = gate.RoleReader
	case RoleController:
		return gate.Principal{Name: "controller/" + p.Name, Role: gate.RoleController, Self: p.Name}
	}
	return gate.Principal{Name: "user/" + p.Name, Role: role, Namespaces: p.Namespaces}
}

// authorizeArtifact checks the request's principal may push or delete the
// image ref, or push the chart name (gate.Authorize: confined writers
// only images named <namespace>/..., charts only unconfined writers).
func authorizeArtifact(ctx context.Context, v gate.Verb, ref string) error {
	if err := gate.Authorize(principalOf(ctx).gate(), v, gate.Target{Image: ref}); err != nil {
		return httpError(http.StatusForbidden, err.Error())
	}
	return nil
}
