package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
)

// BookmarkInterval is how often an idle watch that allows bookmarks is
// told the log's current sequence, so that a client resuming after a
// restart starts from there rather than from its last change.
var BookmarkInterval = 5 * time.Second

// initialEventsEnd marks the bookmark after the initial events of a watch
// with sendInitialEvents=true.
const initialEventsEnd = "k8s.io/initial-events-end"

type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// watch streams changes as Kubernetes does: one JSON WatchEvent per line.
// resourceVersion is a log sequence: the changes after it are sent;
// without one (or with "0") the current objects come first as ADDED.
func (s *Server) watch(w http.ResponseWriter, q *request) error {
	if err := s.authorizeRead(q); err != nil {
		return err
	}
	sel, err := parseSelector(q.r)
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	if q.name != "" {
		// The old form /watch/.../NAME: one object.
		sel.fields = and(sel.fields, "metadata.name", q.name)
	}
	rv := qs.Get("resourceVersion")
	initial := qs.Get("sendInitialEvents") == "true"
	var from uint64
	if rv != "" && rv != "0" && !initial {
		if from, err = strconv.ParseUint(rv, 10, 64); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("resourceVersion: %q is not a log sequence", rv))
		}
		// A client that comes from another instance may name a sequence
		// this one has not folded yet: the changes up to it would be
		// sent again.
		if err := s.waitFresh(w, q.r, from); err != nil {
			return err
		}
	}
	query := projections.Query{Kind: q.res.key(), Namespace: q.namespace}
	var current []map[string]any
	if from == 0 {
		objs, seq := s.cfg.Store.List(query)
		for _, o := range objs {
			if projections.ObjectKey(o).Kind != q.res.key() {
				continue
			}
			if obj := s.show(q, o); sel.matches(obj) {
				current = append(current, obj)
			}
		}
		from = seq
	}
	changes, stop, err := s.cfg.Store.Watch(query, from)
	var resume []watchEvent
	if errorsIsGone(err) && s.cfg.Log != nil && from <= s.cfg.Store.Seq() {
		// The projection's window no longer holds the changes after from
		// (this instance restarted, or the client comes from another):
		// the log does.
		var to uint64
		changes, stop, resume, to, err = s.resume(q, query, sel, from)
		from = to
	}
	if err != nil {
		if errorsIsGone(err) {
			return s.expired(w, rv)
		}
		return err
	}
	// stop changes when the watch takes up again after falling behind.
	defer func() { stop() }()

	ctx := q.r.Context()
	if t := qs.Get("timeoutSeconds"); t != "" {
		if n, err := strconv.Atoi(t); err == nil && n > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
			defer cancel()
		}
	}
	table := wantTable(q.r)
	header := true
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(typ string, obj map[string]any) error {
		var o any = obj
		if table && typ != "BOOKMARK" {
			o = s.table(q, []map[string]any{obj}, header)
			header = false
		}
		return enc.Encode(watchEvent{Type: typ, Object: o})
	}
	for _, obj := range current {
		if err := send("ADDED", obj); err != nil {
			return nil
		}
	}
	for _, ev := range resume {
		if err := send(ev.Type, ev.Object.(map[string]any)); err != nil {
			return nil
		}
	}
	bookmarks := qs.Get("allowWatchBookmarks") == "true"
	last := from
	if initial {
		bm := s.bookmark(q, from)
		bm["metadata"].(map[string]any)["annotations"] = map[string]any{initialEventsEnd: "true"}
		if err := send("BOOKMARK", bm); err != nil {
			return nil
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(BookmarkInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			// Every change up to seq was published to this watch before
			// Seq returned it: an empty channel means all were sent.
			seq := s.cfg.Store.Seq()
			if !bookmarks || len(changes) > 0 || seq <= last {
				continue
			}
			if err := send("BOOKMARK", s.bookmark(q, seq)); err != nil {
				return nil
			}
			last = seq
		case c, ok := <-changes:
			if !ok {
				// This stream fell behind the store's changes (a slow
				// client, or a burst while it sent its initial events). It
				// takes up again from the last change it sent rather than
				// end: client-go lists again when a watch ends at once.
				var more []watchEvent
				var to uint64
				if changes, stop, more, to, err = s.rewatch(q, query, sel, last); err != nil {
					return nil
				}
				for _, ev := range more {
					if err := send(ev.Type, ev.Object.(map[string]any)); err != nil {
						return nil
					}
				}
				last = max(last, to)
				continue
			}
			if c.Key.Kind != q.res.key() {
				continue
			}
			// Shared with every other watch of this resource (built and
			// encoded once); Tables and Secrets are shown per watch.
			if sc := s.shownChange(q, c, table); sc != nil {
				if !sel.matches(sc.obj) {
					continue
				}
				if _, err := w.Write(sc.line); err != nil {
					return nil
				}
				last = max(last, c.Sequence)
				break
			}
			obj := s.show(q, c.Object)
			if c.Type == projections.Deleted {
				obj["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(c.Sequence, 10)
			}
			if !sel.matches(obj) {
				continue
			}
			if err := send(string(c.Type), obj); err != nil {
				return nil
			}
			last = max(last, c.Sequence)
		}
		if flusher != nil && len(changes) == 0 {
			flusher.Flush()
		}
	}
}

// bookmark is a BOOKMARK event's object: the kind and the sequence only.
func (s *Server) bookmark(q *request, seq uint64) map[string]any {
	return map[string]any{"apiVersion": q.res.groupVersion(), "kind": q.res.kind,
		"metadata": map[string]any{"resourceVersion": strconv.FormatUint(seq, 10)}}
}

// expired answers a watch from a sequence the store no longer holds as
// kube-apiserver does: an ERROR event with 410 Gone, which makes
// client-go relist.
func (s *Server) expired(w http.ResponseWriter, rv string) error {
	st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s", rv)).Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w).Encode(watchEvent{Type: "ERROR", Object: &st})
}

// resume starts a live watch at the projection's current sequence (which
// it returns last) and returns, to send before it, the state of every key of the request
// written between from and there: MODIFIED with the object as it is (an
// informer keeps the latest state of a key, not each step), DELETED for
// keys gone since.
func (s *Server) resume(q *request, query projections.Query, sel selector, from uint64) (<-chan projections.Change, func(), []watchEvent, uint64, error) {
	to := s.cfg.Store.Seq()
	changes, stop, err := s.cfg.Store.Watch(query, to)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	keys, err := changedSince(q.r.Context(), s.cfg.Log, q.res.key(), q.namespace, from, to)
	if err != nil {
		stop()
		return nil, nil, nil, 0, err
	}
	var out []watchEvent
	for _, r := range keys {
		o := s.cfg.Store.Get(r.key)
		switch {
		case o == nil:
			md := map[string]any{"name": r.key.Name, "resourceVersion": strconv.FormatUint(r.seq, 10)}
			if r.key.Namespace != "" {
				md["namespace"] = r.key.Namespace
			}
			out = append(out, watchEvent{Type: "DELETED", Object: map[string]any{"apiVersion": q.res.groupVersion(), "kind": q.res.kind, "metadata": md}})
		case o.GetMetadata().GetResourceVersion() <= to:
			// Later versions come with the live stream.
			if obj := s.show(q, o); sel.matches(obj) {
				out = append(out, watchEvent{Type: "MODIFIED", Object: obj})
			}
		}
	}
	return changes, stop, out, to, nil
}
