package kubeapi

import (
	"net/http"
	"strconv"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// A change is shown the same way to every watch of its resource in the
// same version (bar Tables and Secrets): many watchers of one kind would
// otherwise each build and encode the same object. shownChanges keeps the
// most recent ones built, shared by every watch of the process.
var shownChanges = newRingCache[changeID, *shownChange](4096)

// changeID names one change as a watch sends it, or (typ "", seq the
// object's resourceVersion) one object as shown. The store tells apart
// in-process servers on different logs, whose sequences overlap.
type changeID struct {
	store   *projections.Store
	seq     uint64
	key     projections.Key
	typ     projections.ChangeType
	version string
}

// shownChange is a change in Kubernetes' shape: the object (read-only once
// shared, for selectors) and its WatchEvent line as sent; for an object
// alone (shownObject), line is the object's JSON.
type shownChange struct {
	obj  map[string]any
	line []byte
}

// shownChange returns change ch as the watch of q sends it, from the
// shared cache when another watch built it already; nil for changes shown
// per watch (as a Table, or a Secret), which the caller builds itself.
func (s *Server) shownChange(q *request, ch projections.Change, table bool) *shownChange {
	if table || seal.Holds(ch.Object) {
		return nil
	}
	id := changeID{store: s.cfg.Store, seq: ch.Sequence, key: ch.Key, typ: ch.Type, version: q.res.version}
	if sc, ok := shownChanges.get(id); ok {
		return sc
	}
	var obj map[string]any
	var body []byte
	var so *shownChange
	if ch.Type != projections.Deleted {
		so = s.shownObject(q, ch.Object)
	}
	if so != nil {
		// The object as the write that made it was answered (or as
		// another change showed it): built and encoded once.
		obj, body = so.obj, so.line
	} else {
		obj = s.show(q, ch.Object)
		if ch.Type == projections.Deleted {
			obj["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(ch.Sequence, 10)
		}
		var err error
		if body, err = jsonvalue.Marshal(obj); err != nil {
			return nil
		}
	}
	// What json.Marshal makes of watchEvent{Type, Object: obj}, without
	// encoding the object again.
	line := make([]byte, 0, len(body)+len(ch.Type)+24)
	line = append(line, `{"type":"`...)
	line = append(line, ch.Type...)
	line = append(line, `","object":`...)
	line = append(line, body...)
	line = append(line, "}\n"...)
	sc := &shownChange{obj: obj, line: line}
	shownChanges.put(id, sc)
	return sc
}

// shownObject returns o (a stored object, as a write answers it or a watch
// sends it; never a dry run's, which was not stored) in Kubernetes' shape
// at q's version, and its JSON, from the shared cache when a watch or
// another request built it already: a write's answer and the watch event
// of the same write show the same object. The map is shared and
// read-only. nil for objects not shareable.
func (s *Server) shownObject(q *request, o *schemas.Object) *shownChange {
	if !shareable(o) {
		return nil
	}
	id := objectID(s, q, o)
	if so, ok := shownChanges.get(id); ok {
		return so
	}
	obj := s.show(q, o)
	body, err := jsonvalue.Marshal(obj)
	if err != nil {
		return nil
	}
	so := &shownChange{obj: obj, line: body}
	shownChanges.put(id, so)
	return so
}

// shown is o as show makes it, read-only: from the shared cache when it
// holds it (not encoded and kept when it does not: the watch event of o
// was sent before, and its answer went out). Callers that change it copy
// it first.
func (s *Server) shown(q *request, o *schemas.Object) map[string]any {
	if shareable(o) {
		if so, ok := shownChanges.get(objectID(s, q, o)); ok {
			return so.obj
		}
	}
	return s.show(q, o)
}

// shareable reports whether o is shown alike to every caller and by its
// own content alone: not a Secret (shown per caller), without an owner
// (its ownerReferences last only while the owner exists).
func shareable(o *schemas.Object) bool {
	return o != nil && !seal.Holds(o) && o.GetMetadata().GetAnnotations()[gate.AnnotationOwner] == ""
}

// objectID names o as shown at q's version: an object's resourceVersion
// is the log sequence of its last write, so it names one content of its
// key.
func objectID(s *Server, q *request, o *schemas.Object) changeID {
	return changeID{store: s.cfg.Store, seq: o.GetMetadata().GetResourceVersion(), key: projections.ObjectKey(o), version: q.res.version}
}

// showJSON answers o in Kubernetes' shape as writeJSON would, from the
// shared cache when it holds it.
func (s *Server) showJSON(w http.ResponseWriter, q *request, code int, o *schemas.Object) error {
	so := s.shownObject(q, o)
	if so == nil {
		return writeJSON(w, code, s.show(q, o))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// json.Encoder ends what it writes with a newline.
	if _, err := w.Write(so.line); err != nil {
		return err
	}
	_, err := w.Write([]byte{'\n'})
	return err
}
