package kubeapi

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/projections"
)

// A change is shown the same way to every watch of its resource in the
// same version (bar Tables and Secrets): many watchers of one kind would
// otherwise each build and encode the same object. shownChanges keeps the
// most recent ones built, shared by every watch of the process.
var shownChanges = newChangeCache(4096)

// changeID names one change as a watch sends it. The store tells apart
// in-process servers on different logs, whose sequences overlap.
type changeID struct {
	store   *projections.Store
	seq     uint64
	key     projections.Key
	typ     projections.ChangeType
	version string
}

// shownChange is a change in Kubernetes' shape: the object (read-only once
// shared, for selectors) and its WatchEvent line as sent.
type shownChange struct {
	obj  map[string]any
	line []byte
}

type changeCache struct {
	mu   sync.Mutex
	m    map[changeID]*shownChange
	ring []changeID // insertion order; the oldest is replaced first
	next int
}

func newChangeCache(n int) *changeCache {
	return &changeCache{m: make(map[changeID]*shownChange, n), ring: make([]changeID, 0, n)}
}

func (c *changeCache) get(id changeID) *shownChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

func (c *changeCache) put(id changeID, sc *shownChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; ok {
		return
	}
	if len(c.ring) < cap(c.ring) {
		c.ring = append(c.ring, id)
	} else {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = id
		c.next = (c.next + 1) % len(c.ring)
	}
	c.m[id] = sc
}

// shownChange returns change ch as the watch of q sends it, from the
// shared cache when another watch built it already; nil for changes shown
// per watch (as a Table, or a Secret), which the caller builds itself.
func (s *Server) shownChange(q *request, ch projections.Change, table bool) *shownChange {
	if table || seal.Holds(ch.Object) {
		return nil
	}
	id := changeID{store: s.cfg.Store, seq: ch.Sequence, key: ch.Key, typ: ch.Type, version: q.res.version}
	if sc := shownChanges.get(id); sc != nil {
		return sc
	}
	obj := s.show(q, ch.Object)
	if ch.Type == projections.Deleted {
		obj["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(ch.Sequence, 10)
	}
	line, err := json.Marshal(watchEvent{Type: string(ch.Type), Object: obj})
	if err != nil {
		return nil
	}
	sc := &shownChange{obj: obj, line: append(line, '\n')}
	shownChanges.put(id, sc)
	return sc
}
