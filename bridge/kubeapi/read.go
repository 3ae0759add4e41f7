package kubeapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// reader is what reads objects: the live projection, or state as of an
// earlier sequence (?asOf=).
type reader interface {
	Get(k projections.Key) *schemas.Object
	Keys(q projections.Query) ([]projections.Key, uint64)
}

// source returns what the request reads: the live store, or the state as
// of ?asOf= (a log sequence or an RFC 3339 time), with its sequence.
func (s *Server) source(q *request) (reader, error) {
	at := q.r.URL.Query().Get("asOf")
	if at == "" {
		return s.cfg.Store, nil
	}
	if s.cfg.History == nil {
		return nil, apierrors.NewBadRequest("asOf: this server keeps no history reader")
	}
	ctx := q.r.Context()
	seq, err := strconv.ParseUint(at, 10, 64)
	if err != nil {
		t, terr := time.Parse(time.RFC3339Nano, at)
		if terr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("asOf: %q is neither a log sequence nor an RFC 3339 time (such as 2026-01-02T15:04:05Z)", at))
		}
		if seq, err = s.cfg.History.SequenceAt(ctx, t); err != nil {
			return nil, err
		}
	}
	if head := s.cfg.Store.Seq(); seq > head {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("asOf: sequence %d is past the newest event (%d)", seq, head))
	}
	return s.cfg.History.StateAt(ctx, seq)
}

func (s *Server) authorizeRead(q *request) error {
	t := gate.Target{Kind: q.res.key(), Namespace: q.namespace, Name: q.name, ClusterScoped: !q.res.namespaced}
	if err := gate.Authorize(q.caller.Principal, gate.VerbRead, t); err != nil {
		return apierrors.NewForbidden(q.groupResource(), q.name, err)
	}
	return nil
}

func (s *Server) get(w http.ResponseWriter, q *request) error {
	if err := s.authorizeRead(q); err != nil {
		return err
	}
	src, err := s.source(q)
	if err != nil {
		return err
	}
	o := src.Get(q.key())
	if o == nil {
		return apierrors.NewNotFound(q.groupResource(), q.name)
	}
	obj := s.show(q, o)
	if wantTable(q.r) {
		return writeJSON(w, http.StatusOK, s.table(q, []map[string]any{obj}, true))
	}
	return writeJSON(w, http.StatusOK, obj)
}

// selector is a request's label and field selectors, parsed by
// apimachinery. Field selectors name any field path of the object in
// Kubernetes' shape (metadata.name, status.phase, spec.nodeName).
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelector(r *http.Request) (selector, error) {
	qs := r.URL.Query()
	ls, err := labels.Parse(qs.Get("labelSelector"))
	if err != nil {
		return selector{}, apierrors.NewBadRequest("labelSelector: " + err.Error())
	}
	fs, err := fields.ParseSelector(qs.Get("fieldSelector"))
	if err != nil {
		return selector{}, apierrors.NewBadRequest("fieldSelector: " + err.Error())
	}
	return selector{labels: ls, fields: fs}, nil
}

func (sel selector) matches(obj map[string]any) bool {
	md, _ := obj["metadata"].(map[string]any)
	set := labels.Set{}
	if ls, ok := md["labels"].(map[string]any); ok {
		for k, v := range ls {
			set[k], _ = v.(string)
		}
	}
	if !sel.labels.Matches(set) {
		return false
	}
	if sel.fields.Empty() {
		return true
	}
	fset := fields.Set{}
	for _, req := range sel.fields.Requirements() {
		fset[req.Field] = fieldValue(obj, req.Field)
	}
	return sel.fields.Matches(fset)
}

// fieldValue is the value at a dotted path of obj, as a string.
func fieldValue(obj map[string]any, path string) string {
	var cur any = obj
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// cursor is a list's continue token: the sequence of the first page and
// the last key sent.
type cursor struct {
	Seq       uint64 `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"n"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, apierrors.NewBadRequest("continue: not a token this server gave")
	}
	return c, nil
}

// keys returns the keys of the request's kind (exactly: not the same kind
// of another group) in its namespace, ordered, and their sequence.
func (s *Server) keys(src reader, q *request) ([]projections.Key, uint64) {
	all, seq := src.Keys(projections.Query{Kind: q.res.key(), Namespace: q.namespace})
	out := all[:0]
	for _, k := range all {
		if k.Kind == q.res.key() {
			out = append(out, k)
		}
	}
	return out, seq
}

func (s *Server) list(w http.ResponseWriter, q *request) error {
	if err := s.authorizeRead(q); err != nil {
		return err
	}
	sel, err := parseSelector(q.r)
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	limit := 0
	if l := qs.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("limit: %q is not a count", l))
		}
	}
	if atLeast, err := minResourceVersion(q.r); err != nil {
		return err
	} else if err := s.waitFresh(w, q.r, atLeast); err != nil {
		return err
	}
	src, err := s.source(q)
	if err != nil {
		return err
	}
	keys, seq := s.keys(src, q)
	var after *cursor
	if tok := qs.Get("continue"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			return err
		}
		after, seq = &c, c.Seq
	}
	items := []map[string]any{}
	next := ""
	for _, k := range keys {
		if after != nil && (k.Namespace < after.Namespace || (k.Namespace == after.Namespace && k.Name <= after.Name)) {
			continue
		}
		if limit > 0 && len(items) == limit {
			last := items[len(items)-1]["metadata"].(map[string]any)
			ns, _ := last["namespace"].(string)
			next = cursor{Seq: seq, Namespace: ns, Name: last["name"].(string)}.encode()
			break
		}
		o := src.Get(k)
		if o == nil {
			continue
		}
		obj := s.show(q, o)
		if sel.matches(obj) {
			items = append(items, obj)
		}
	}
	if wantTable(q.r) {
		t := s.table(q, items, true)
		t.ResourceVersion, t.Continue = strconv.FormatUint(seq, 10), next
		return writeJSON(w, http.StatusOK, t)
	}
	meta := map[string]any{"resourceVersion": strconv.FormatUint(seq, 10)}
	if next != "" {
		meta["continue"] = next
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": q.res.groupVersion(), "kind": q.res.kind + "List", "metadata": meta, "items": items,
	})
}

func errorsIsGone(err error) bool { return errors.Is(err, projections.ErrGone) }

// and adds field=value to sel.
func and(sel fields.Selector, field, value string) fields.Selector {
	return fields.AndSelectors(sel, fields.OneTermEqualSelector(field, value))
}
