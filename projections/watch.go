package projections

import (
	"errors"
	"fmt"

	"github.com/jetplane/jetplane/schemas"
)

// ChangeType says how a key changed.
type ChangeType string

// Change types, as in a Kubernetes watch.
const (
	Added    ChangeType = "ADDED"
	Modified ChangeType = "MODIFIED"
	Deleted  ChangeType = "DELETED"
)

// Change is one key's change. Object is the state after the change, or the
// last state (at the deleting event's sequence) for Deleted.
type Change struct {
	Type     ChangeType
	Key      Key
	Object   *schemas.Object
	Sequence uint64
	// Event is the event that caused the change, for logging and audit
	// (nil for the current objects a watch from 0 starts with).
	Event *schemas.EventRecord
	// Record is the state as the store keeps it, its spec still encoded,
	// set in place of Object by WatchRecords (nil from Watch). It is the
	// store's own: read it, never change it.
	Record *schemas.ObjectRecord
}

// change is a Change as the store keeps it, with the object's spec still
// encoded; it is decoded only for watchers that receive it.
type change struct {
	typ   ChangeType
	key   Key
	prev  *schemas.ObjectRecord // the state before; nil for Added
	rec   *schemas.ObjectRecord
	seq   uint64
	event *schemas.EventRecord
}

func (c change) decode(typ ChangeType) Change {
	return Change{Type: typ, Key: c.key, Object: ObjectOf(c.rec), Sequence: c.seq, Event: c.event}
}

// record is c for a watcher of records: nothing decoded.
func (c change) record(typ ChangeType) Change {
	return Change{Type: typ, Key: c.key, Record: c.rec, Sequence: c.seq, Event: c.event}
}

// as says how a watcher with query q sees c, if at all. An object whose
// labels move it into q's selection is Added for that watcher, one moving
// out is Deleted, as in a Kubernetes watch.
func (c change) as(q Query) (ChangeType, bool) {
	was := c.prev != nil && q.matches(c.key, c.prev)
	is := c.typ != Deleted && q.matches(c.key, c.rec)
	switch {
	case was && is:
		return Modified, true
	case is:
		return Added, true
	case was:
		return Deleted, true
	}
	return "", false
}

// ErrGone means a watch asked to resume from a resourceVersion older than
// the changes the store still holds; list again and watch from the list's
// resourceVersion.
var ErrGone = errors.New("resourceVersion is too old")

// ErrCatchingUp means the store is still replaying the log and cannot be
// watched yet; try again once the projection is ready.
var ErrCatchingUp = errors.New("projection is catching up with the log")

func newChange(k Key, cur, next *schemas.ObjectRecord, ev *schemas.EventRecord) change {
	c := change{key: k, prev: cur, rec: next, seq: ev.Sequence, event: ev}
	switch {
	case cur == nil:
		c.typ = Added
	case next == nil:
		c.typ = Deleted
		c.rec = revise(cur, ev.Sequence)
	default:
		c.typ = Modified
	}
	return c
}

// watchHub keeps a window of recent changes and the live watchers. Its
// methods are called with the Store's lock held.
type watchHub struct {
	window  int
	ring    []change // oldest first once full; next write at head
	head    int
	full    bool
	floor   uint64 // watches may resume from any sequence >= floor
	nextID  int
	members map[int]*watcher
}

type watcher struct {
	q       Query
	ch      chan Change
	records bool // WatchRecords: Record set, Object not decoded
}

func newWatchHub(window int) watchHub {
	return watchHub{window: window, ring: make([]change, 0, min(window, 1024)), members: map[int]*watcher{}}
}

func (h *watchHub) publish(c change) {
	if len(h.ring) < h.window {
		h.ring = append(h.ring, c)
	} else {
		h.floor = h.ring[h.head].seq
		h.ring[h.head] = c
		h.head = (h.head + 1) % h.window
	}
	var decoded *Change
	for id, w := range h.members {
		typ, ok := c.as(w.q)
		if !ok {
			continue
		}
		var out Change
		if w.records {
			out = c.record(typ)
		} else {
			if decoded == nil {
				d := c.decode(typ)
				decoded = &d
			}
			out = *decoded
			out.Type = typ
		}
		select {
		case w.ch <- out:
		default:
			// A watcher that cannot keep up is ended rather than allowed to
			// stall the fold; it resumes from the last sequence it saw.
			close(w.ch)
			delete(h.members, id)
		}
	}
}

func (h *watchHub) reset(seq uint64) {
	h.ring, h.head, h.floor = h.ring[:0], 0, seq
	for id, w := range h.members {
		close(w.ch)
		delete(h.members, id)
	}
}

// since returns the changes after seq, oldest first.
func (h *watchHub) since(seq uint64) ([]change, error) {
	if seq < h.floor {
		return nil, fmt.Errorf("%w: %d is older than the oldest change kept (%d); list and watch again", ErrGone, seq, h.floor)
	}
	var out []change
	n := len(h.ring)
	for i := range n {
		c := h.ring[(h.head+i)%n]
		if c.seq > seq {
			out = append(out, c)
		}
	}
	return out, nil
}

// WatchBuffer is how many changes a watcher may fall behind before it is
// ended.
const WatchBuffer = 4096

// Watch streams the changes of objects matching q. With from = 0 it first
// sends every matching object as Added (Sequence 0 but for the last, which
// carries the list's sequence), then changes as they happen; with
// from > 0 it sends the changes after sequence from (ErrGone when the store
// no longer holds them). The channel closes when stop is called or when the
// watcher falls more than WatchBuffer changes behind; the receiver resumes
// from the last Sequence it saw.
func (s *Store) Watch(q Query, from uint64) (changes <-chan Change, stop func(), err error) {
	return s.watchFor(q, from, false)
}

// WatchRecords is Watch with each change's state in Change.Record, its
// spec left encoded, and Object nil: for a watcher that reads most
// changes' specs seldom or only in part (ObjectOf decodes one).
func (s *Store) WatchRecords(q Query, from uint64) (changes <-chan Change, stop func(), err error) {
	return s.watchFor(q, from, true)
}

func (s *Store) watchFor(q Query, from uint64, records bool) (changes <-chan Change, stop func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bulk {
		return nil, nil, ErrCatchingUp
	}
	var backlog []Change
	if from == 0 {
		// The current objects are one list as of s.seq: only the last
		// carries that sequence, so a receiver that loses the stream
		// part-way resumes with a fresh list (from 0), not from a point
		// that would skip the objects it never got.
		keys := s.match(q)
		for i, k := range keys {
			c := Change{Type: Added, Key: k}
			if records {
				c.Record = s.objects[k]
			} else {
				c.Object = ObjectOf(s.objects[k])
			}
			if i == len(keys)-1 {
				c.Sequence = s.seq
			}
			backlog = append(backlog, c)
		}
	} else {
		past, err := s.watch.since(from)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range past {
			if typ, ok := c.as(q); !ok {
				continue
			} else if records {
				backlog = append(backlog, c.record(typ))
			} else {
				backlog = append(backlog, c.decode(typ))
			}
		}
	}
	ch := make(chan Change, len(backlog)+WatchBuffer)
	for _, c := range backlog {
		ch <- c
	}
	h := &s.watch
	id := h.nextID
	h.nextID++
	h.members[id] = &watcher{q: q, ch: ch, records: records}
	stop = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w, ok := h.members[id]; ok {
			close(w.ch)
			delete(h.members, id)
		}
	}
	return ch, stop, nil
}
