package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
	"github.com/jetplane/jetplane/schemas/kinds"
)

// The routes the CLI's kubectl-like commands and the console use beyond
// the core ones: kinds, version, describe.
func (s *Server) routeCLI() {
	s.route("GET /v1/kinds", s.kinds)
	s.route("GET /v1/version", s.version)
	s.route("GET /v1/describe", s.describe)
	s.route("GET /v1/partitions", s.partitions)
	if s.cfg.Console != nil {
		s.mux.Handle("GET /{$}", s.console())
		s.mux.Handle("GET /console/", s.console())
	}
}

// console serves the web console's static files. They need no token: the
// page holds no data, and every request it makes for data goes through the
// API's authentication like any client's.
func (s *Server) console() http.Handler {
	return s.cfg.Console
}

// noRoute answers a request no route matches, in the API's JSON.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	// The mux knows whether the path exists with another method.
	rec := &allowRecorder{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	code, msg := http.StatusNotFound, fmt.Sprintf("no such path: %s %s; the API's paths start with /v1/ (see the README's HTTP API)", r.Method, r.URL.Path)
	if rec.code == http.StatusMethodNotAllowed {
		code = http.StatusMethodNotAllowed
		msg = fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, rec.header.Get("Allow"))
		w.Header().Set("Allow", rec.header.Get("Allow"))
	}
	s.reqs.WithLabelValues("unmatched", fmt.Sprint(code)).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorResponse{Error: msg})
}

// allowRecorder keeps the status and headers the mux's own 404/405
// handler would send, and drops its text body.
type allowRecorder struct {
	header http.Header
	code   int
}

func (a *allowRecorder) Header() http.Header         { return a.header }
func (a *allowRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (a *allowRecorder) WriteHeader(code int)        { a.code = code }

// resolveKind rewrites the request's kind parameter to the kind as keys
// hold it (package kinds): "deploy", "deployments" and "Deployment" all
// become "Deployment.apps". History keeps a kind it cannot resolve as
// written, since a key may have events from before this process started.
// q is r's query, changed with it.
func (s *Server) resolveKind(r *http.Request, q url.Values, route string) error {
	name := q.Get("kind")
	if name == "" {
		return nil
	}
	kind, err := kinds.ResolveDefined(name, s.cfg.Store.Kinds(), s.defined().Infos())
	if err != nil {
		if route == "/v1/history" && errors.Is(err, kinds.ErrUnknown) {
			return nil
		}
		return &statusError{code: http.StatusBadRequest, msg: err.Error()}
	}
	q.Set("kind", kind)
	r.URL.RawQuery = q.Encode()
	return nil
}

// defined is the catalog of defined kinds (empty when the server has
// none).
func (s *Server) defined() *crd.Catalog {
	if s.cfg.Defined == nil {
		return crd.NewCatalog(nil)
	}
	return s.cfg.Defined()
}

func (s *Server) reconciler(kind string) string {
	if s.cfg.Reconciler == nil {
		return ""
	}
	return s.cfg.Reconciler(kind)
}

// kinds answers GET /v1/kinds: every kind known by name, with its short
// names, how many objects of it exist and what reconciles it.
//
// A confined token counts, and sees kinds seen, only in its namespaces
// (the one it names with ?namespace=, or all of them): counts elsewhere
// would tell it what other namespaces hold.
func (s *Server) kinds(w http.ResponseWriter, r *http.Request, _ string) error {
	seen := s.cfg.Store.Kinds()
	var scope []string
	if p := principalOf(r.Context()); len(p.Namespaces) > 0 {
		scope = p.Namespaces
		if ns := r.URL.Query().Get("namespace"); ns != "" {
			scope = []string{ns}
		}
	}
	count := func(kind string) int {
		if scope == nil {
			keys, _ := s.cfg.Store.Keys(projections.Query{Kind: kind})
			return len(keys)
		}
		n := 0
		for _, ns := range scope {
			keys, _ := s.cfg.Store.Keys(projections.Query{Kind: kind, Namespace: ns})
			n += len(keys)
		}
		return n
	}
	if scope != nil {
		seen = slices.DeleteFunc(slices.Clone(seen), func(k string) bool { return count(k) == 0 })
	}
	defined := s.defined()
	resp := KindsResponse{Kinds: []KindInfo{}}
	for _, in := range kinds.CatalogueDefined(seen, defined.Infos()) {
		info := KindInfo{
			Kind: in.Kind, Group: in.Group, Name: in.Key(), Plural: in.Plural, ShortNames: in.Short,
			Namespaced: in.Namespaced, Objects: count(in.Key()), Seen: slices.Contains(seen, in.Key()),
			Reconciler: s.reconciler(in.Key()),
		}
		if d := defined.Lookup(in.Key()); d != nil {
			for _, c := range d.Columns(d.Storage) {
				info.Columns = append(info.Columns, PrinterColumn{Name: c.Name, Type: c.Type, JSONPath: c.JSONPath, Priority: c.Priority})
			}
		}
		resp.Kinds = append(resp.Kinds, info)
	}
	return writeJSON(w, resp)
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request, _ string) error {
	return writeJSON(w, s.cfg.Version)
}

// describe answers GET /v1/describe: one object with what explains its
// state — its dependencies' readiness, its dependents, its last events and
// what reconciles it.
func (s *Server) describe(w http.ResponseWriter, r *http.Request, _ string) error {
	k, err := keyParam(r)
	if err != nil {
		return err
	}
	o := s.cfg.Store.Get(k)
	if o == nil {
		return httpError(http.StatusNotFound, fmt.Sprintf("%s not found", k))
	}
	k = projections.ObjectKey(o)
	resp := DescribeResponse{Object: rawObject(s.show(r, s.withNextRun(o))), Reconciler: s.reconciler(k.Kind), Dependents: []Key{}, Dependencies: []Dependency{}, Events: []json.RawMessage{}}
	p := principalOf(r.Context())
	for _, d := range o.GetMetadata().GetDependsOn() {
		dk := projections.KeyOf(d)
		dep := Dependency{Key: wireKey(dk), Ready: "missing"}
		if !p.inScope(dk.Namespace) {
			// Whether it exists, and how it does, is another namespace's.
			dep.Ready = "Unknown"
		} else if do := s.cfg.Store.Get(dk); do != nil {
			dep.Ready, dep.Phase = readyStatus(do.GetStatus()), do.GetStatus().GetPhase()
		}
		resp.Dependencies = append(resp.Dependencies, dep)
	}
	for _, dk := range s.cfg.Store.Dependents(k) {
		if p.inScope(dk.Namespace) {
			resp.Dependents = append(resp.Dependents, wireKey(dk))
		}
	}
	const lastEvents = 10
	evs, err := s.cfg.Log.LastEvents(r.Context(), k.Proto(), lastEvents)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		resp.Events = append(resp.Events, rawEvent(s.showEvent(r, ev)))
	}
	return writeJSON(w, resp)
}

func readyStatus(st *schemas.Status) string {
	for _, c := range st.GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus()
		}
	}
	return "Unknown"
}

// fieldSelector is a parsed ?fieldSelector=: the fields kubectl users
// select on most, metadata.name, metadata.namespace and status.phase, with
// =, == and !=, comma-separated (all must hold).
type fieldSelector []fieldTerm

type fieldTerm struct {
	field, value string
	not          bool
}

var selectableFields = []string{"metadata.name", "metadata.namespace", "status.phase"}

func parseFieldSelector(sel string) (fieldSelector, error) {
	var out fieldSelector
	for _, part := range strings.Split(sel, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var t fieldTerm
		var ok bool
		if t.field, t.value, ok = strings.Cut(part, "!="); ok {
			t.not = true
		} else if t.field, t.value, ok = strings.Cut(part, "=="); !ok {
			if t.field, t.value, ok = strings.Cut(part, "="); !ok {
				return nil, fmt.Errorf("fieldSelector: %q: want FIELD=VALUE or FIELD!=VALUE", part)
			}
		}
		t.field, t.value = strings.TrimSpace(t.field), strings.TrimSpace(t.value)
		if !slices.Contains(selectableFields, t.field) {
			return nil, fmt.Errorf("fieldSelector: %q is not a selectable field; use one of %s", t.field, strings.Join(selectableFields, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

func (f fieldSelector) matches(o *schemas.Object) bool {
	for _, t := range f {
		var v string
		switch t.field {
		case "metadata.name":
			v = o.GetMetadata().GetName()
		case "metadata.namespace":
			v = o.GetMetadata().GetNamespace()
		case "status.phase":
			v = o.GetStatus().GetPhase()
		}
		if (v == t.value) == t.not {
			return false
		}
	}
	return true
}

func (f fieldSelector) filter(objs []*schemas.Object) []*schemas.Object {
	if len(f) == 0 {
		return objs
	}
	out := objs[:0:0]
	for _, o := range objs {
		if f.matches(o) {
			out = append(out, o)
		}
	}
	return out
}

func fieldParam(r *http.Request) (fieldSelector, error) {
	f, err := parseFieldSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		return nil, httpError(http.StatusBadRequest, err.Error())
	}
	return f, nil
}

// byResourceVersion orders objects oldest change first: a watch that
// sends the current objects in this order can name each with its own
// resourceVersion, and a client resuming from one misses nothing (every
// object not yet sent changed after it, so the resumed watch replays it).
func byResourceVersion(objs []*schemas.Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		return objs[i].GetMetadata().GetResourceVersion() < objs[j].GetMetadata().GetResourceVersion()
	})
}

// deleteNamespace deletes a Namespace and, first, every object in it,
// dependents before what they depend on (kubectl's cascade; ?cascade=orphan
// deletes the Namespace alone). Objects already being deleted are
// reported unchanged.
func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request, _ string, ns projections.Key) error {
	actor := principalOf(r.Context()).gate()
	// Out of scope is refused before existence is told.
	if err := gate.Authorize(actor, gate.VerbDelete, gate.Target{Kind: ns.Kind, Name: ns.Name, ClusterScoped: true}); err != nil {
		return err
	}
	if s.cfg.Store.Get(ns) == nil {
		return httpError(http.StatusNotFound, fmt.Sprintf("%s not found", ns))
	}
	objs, _ := s.cfg.Store.List(projections.Query{Namespace: ns.Name})
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var resp ApplyResponse
	for _, k := range reverseDependencyOrder(objs) {
		out, err := s.cfg.Gate.Delete(r.Context(), actor, k, idem)
		if err != nil {
			if errors.Is(err, gate.ErrNotFound) {
				continue // gone meanwhile
			}
			return err
		}
		resp.Results = append(resp.Results, ApplyResult{Key: wireKey(out.Key), Action: string(out.Action)})
	}
	out, err := s.cfg.Gate.Delete(r.Context(), actor, ns, idem)
	if err != nil {
		return err
	}
	resp.Results = append(resp.Results, ApplyResult{Key: wireKey(out.Key), Action: string(out.Action), Object: rawObject(s.show(r, out.Object))})
	return writeJSON(w, resp)
}

// reverseDependencyOrder orders objects so that each comes before every
// object it depends on (among objs), ties by key.
func reverseDependencyOrder(objs []*schemas.Object) []projections.Key {
	keys := make([]projections.Key, len(objs))
	in := map[projections.Key]bool{}
	for i, o := range objs {
		keys[i] = projections.ObjectKey(o)
		in[keys[i]] = true
	}
	// dependents[d] counts the objects in objs that depend on d and are
	// not yet placed.
	dependents := map[projections.Key]int{}
	deps := map[projections.Key][]projections.Key{}
	for i, o := range objs {
		for _, d := range o.GetMetadata().GetDependsOn() {
			dk := projections.KeyOf(d)
			if in[dk] && dk != keys[i] {
				dependents[dk]++
				deps[keys[i]] = append(deps[keys[i]], dk)
			}
		}
	}
	placed := map[projections.Key]bool{}
	var out []projections.Key
	for len(out) < len(keys) {
		progress := false
		for _, k := range keys {
			if placed[k] || dependents[k] > 0 {
				continue
			}
			placed[k], progress = true, true
			out = append(out, k)
			for _, d := range deps[k] {
				dependents[d]--
			}
		}
		if !progress {
			// A cycle (the gate rejects them, but the log may predate
			// that): the rest in key order.
			for _, k := range keys {
				if !placed[k] {
					placed[k] = true
					out = append(out, k)
				}
			}
		}
	}
	return out
}

// partitions answers GET /v1/partitions: the instances running
// reconcilers and the partitions each holds.
func (s *Server) partitions(w http.ResponseWriter, r *http.Request, _ string) error {
	resp := PartitionsResponse{Partitions: s.cfg.Version.Partitions, Instances: []InstancePartitions{}, Unheld: []int{}}
	if s.cfg.Partitions == nil {
		return writeJSON(w, resp)
	}
	holders, err := s.cfg.Partitions(r.Context())
	if err != nil {
		return err
	}
	by := map[string][]int{}
	for p := range resp.Partitions {
		if h, ok := holders[p]; ok {
			by[h] = append(by[h], p)
		} else {
			resp.Unheld = append(resp.Unheld, p)
		}
	}
	for inst, ps := range by {
		resp.Instances = append(resp.Instances, InstancePartitions{Instance: inst, Partitions: ps})
	}
	sort.Slice(resp.Instances, func(i, j int) bool { return resp.Instances[i].Instance < resp.Instances[j].Instance })
	return writeJSON(w, resp)
}
