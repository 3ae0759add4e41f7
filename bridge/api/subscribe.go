package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/kinds"
	"github.com/jetplane/jetplane/schemas/subscription"
)

// FromHeader answers GET /v1/subscribe with the sequence the stream starts
// after, now and times resolved.
const FromHeader = "Jetplane-From"

// subscribe streams changes as CloudEvents, one JSON object a line, the
// same events a Subscription's sink receives: from=now|SEQ|TIME (the
// changes after it; default now), kinds=, namespaces=, selector=, types=
// (comma-separated), follow=false to stop at the end of the log.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request, _ string) error {
	q := r.URL.Query()
	list := func(name string) []string {
		var out []string
		for _, v := range strings.Split(q.Get(name), ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	var f subscription.Filter
	f.Kinds = list("kinds")
	for i, k := range f.Kinds {
		if kind, err := kinds.Resolve(k, s.cfg.Store.Kinds()); err == nil {
			f.Kinds[i] = kind
		} else {
			return httpError(http.StatusBadRequest, fmt.Sprintf("kinds: %v", err))
		}
	}
	f.Namespaces = list("namespaces")
	p := principalOf(r.Context())
	if len(p.Namespaces) > 0 {
		if len(f.Namespaces) == 0 {
			f.Namespaces = p.Namespaces
		}
		for _, ns := range f.Namespaces {
			if !p.inScope(ns) {
				return httpError(http.StatusForbidden, fmt.Sprintf("%s may not read namespace %q; subscribe with -n for namespaces %s", p.Name, ns, strings.Join(p.Namespaces, ",")))
			}
		}
	}
	if sel := q.Get("selector"); sel != "" {
		parsed, err := labels.Parse(sel)
		if err != nil {
			return httpError(http.StatusBadRequest, fmt.Sprintf("selector: %v", err))
		}
		f.Labels = parsed
	}
	for _, t := range list("types") {
		v, ok := subscription.TypeNames[t]
		if !ok {
			return httpError(http.StatusBadRequest, fmt.Sprintf("types: %q is not an event type (Applied, DeleteRequested, Observed, StatusChanged, Bound, Finalized)", t))
		}
		f.Types = append(f.Types, v)
	}
	start, err := subscription.ParseStart(q.Get("from"))
	if err != nil {
		return httpError(http.StatusBadRequest, "from: "+err.Error())
	}
	var from uint64
	switch {
	case start.Now:
		from = s.cfg.Store.Seq()
	case !start.Time.IsZero():
		seq, err := s.cfg.Log.SequenceAt(r.Context(), start.Time)
		if err != nil {
			return err
		}
		from = max(seq, 1) - 1
	default:
		from = start.Sequence
	}
	follow := q.Get("follow") != "false"

	w.Header().Set(FromHeader, strconv.FormatUint(from, 10))
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	feed := projections.Feed{Store: s.cfg.Store, Log: s.cfg.Log, Blobs: s.cfg.Blobs}
	// Lines are written as they come and flushed at most every 50 ms, so a
	// reader catching up from an old sequence gets full packets and a
	// follower gets each change within 50 ms.
	var mu sync.Mutex
	dirty := false
	stop := make(chan struct{})
	defer close(stop)
	if flusher != nil {
		go func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					mu.Lock()
					if dirty {
						flusher.Flush()
						dirty = false
					}
					mu.Unlock()
				}
			}
		}()
	}
	enc := json.NewEncoder(w)
	err = feed.Read(r.Context(), projections.FeedOptions{From: from, Follow: follow}, func(c projections.Change) error {
		if c.Event == nil || !f.Match(c.Key.Kind, c.Key.Namespace, labelsOf(c.Object), c.Event.GetType()) {
			return nil
		}
		ev, err := subscription.NewEvent(c.Event, s.show(r, c.Object))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		dirty = true
		return enc.Encode(ev)
	})
	mu.Lock()
	if flusher != nil {
		flusher.Flush()
	}
	mu.Unlock()
	if err != nil && r.Context().Err() == nil {
		s.cfg.Logger.Warn("subscribe stream ended", "err", err)
	}
	return nil
}

func labelsOf(o *schemas.Object) map[string]string {
	return o.GetMetadata().GetLabels()
}
