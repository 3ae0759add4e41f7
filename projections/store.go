package projections

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jetplane/jetplane/schemas"
)

// Store is the current state of every key, folded from the log, with the
// indexes an informer cache keeps. It is safe for concurrent use. Objects it
// returns are shared and must not be modified.
type Store struct {
	mu      sync.RWMutex
	seq     uint64 // last sequence applied
	objects map[Key]*schemas.ObjectRecord
	byKind  map[string]keySet
	byNS    map[string]keySet
	byGroup map[string]keySet
	// byLabel is label key -> value -> keys.
	byLabel map[string]map[string]keySet
	// dependents is dependency -> keys whose dependsOn names it. A slice,
	// not a set: most objects have few dependents, and a map per
	// dependency costs more than the scan on removal.
	dependents map[Key][]Key

	// notify is closed and replaced once the store reaches waitMin, the
	// lowest sequence a WaitFor waits for (0: nobody waits). WaitFor
	// lowers waitMin (under the read lock) before it waits on notify. A
	// channel made and closed per event, waking every waiter each time,
	// was a fifth of the store's cost in a replay, and in a burst woke
	// each request waiting for its own write at every event before it.
	notify  chan struct{}
	waitMin atomic.Uint64
	watch   watchHub
	// bulk defers the secondary indexes while a replay catches up: only
	// objects is kept current, and EndBulk builds the indexes once from the
	// final state. A replay of a long log churns the same keys many times;
	// indexing each step costs more than decoding the event.
	bulk     bool
	onChange func(Changed)
	// kinds holds every kind folded since the store was made, including
	// kinds no object has any longer (see Kinds).
	kinds map[string]struct{}
}

type keySet map[Key]struct{}

// StoreOptions tune a Store.
type StoreOptions struct {
	// WatchWindow is how many recent changes are kept so that watches can
	// resume from an older resourceVersion (default 10000).
	WatchWindow int
}

// NewStore returns an empty store.
func NewStore(opts StoreOptions) *Store {
	if opts.WatchWindow <= 0 {
		opts.WatchWindow = 10000
	}
	return &Store{
		objects:    map[Key]*schemas.ObjectRecord{},
		byKind:     map[string]keySet{},
		byNS:       map[string]keySet{},
		byGroup:    map[string]keySet{},
		byLabel:    map[string]map[string]keySet{},
		dependents: map[Key][]Key{},
		notify:     make(chan struct{}),
		watch:      newWatchHub(opts.WatchWindow),
	}
}

// Apply folds one event into the store. Events must come in log order;
// events at or below the store's sequence are ignored (a resumed reader may
// deliver some twice). The store takes ownership of ev.
func (s *Store) Apply(ev *schemas.EventRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Sequence != 0 && ev.Sequence <= s.seq {
		return
	}
	k := KeyOf(ev.Key)
	s.noteKind(k.Kind)
	cur := s.objects[k]
	next := Fold(cur, ev)
	if next != cur {
		if s.bulk {
			if next == nil {
				delete(s.objects, k)
			} else {
				s.objects[k] = next
			}
		} else if cur != nil && next != nil && sameIndexed(cur.Metadata, next.Metadata) {
			// Most events (status writes, re-applies) leave every index
			// as it was; only the object itself changes.
			s.objects[k] = next
		} else {
			s.unindex(k, cur)
			s.index(k, next)
		}
		if !s.bulk {
			s.watch.publish(newChange(k, cur, next, ev))
			if s.onChange != nil {
				s.onChange(Changed{Key: k, Prev: cur, Next: next, Sequence: ev.Sequence, Dependents: s.dependents[k]})
			}
		}
	}
	s.seq = ev.Sequence
	if w := s.waitMin.Load(); w != 0 && s.seq >= w {
		// Every waiter wakes; those still short of their sequence lower
		// waitMin again.
		s.waitMin.Store(0)
		close(s.notify)
		s.notify = make(chan struct{})
	}
}

func (s *Store) index(k Key, o *schemas.ObjectRecord) {
	if o == nil {
		return
	}
	s.objects[k] = o
	add(s.byKind, k.Kind, k)
	add(s.byNS, k.Namespace, k)
	if g := o.Metadata.GetGroup(); g != "" {
		add(s.byGroup, g, k)
	}
	for lk, lv := range o.Metadata.GetLabels() {
		vals := s.byLabel[lk]
		if vals == nil {
			vals = map[string]keySet{}
			s.byLabel[lk] = vals
		}
		add(vals, lv, k)
	}
	for _, d := range o.Metadata.GetDependsOn() {
		dk := dependencyKey(d)
		if !slices.Contains(s.dependents[dk], k) {
			s.dependents[dk] = append(s.dependents[dk], k)
		}
	}
}

func (s *Store) unindex(k Key, o *schemas.ObjectRecord) {
	if o == nil {
		return
	}
	delete(s.objects, k)
	remove(s.byKind, k.Kind, k)
	remove(s.byNS, k.Namespace, k)
	if g := o.Metadata.GetGroup(); g != "" {
		remove(s.byGroup, g, k)
	}
	for lk, lv := range o.Metadata.GetLabels() {
		if vals := s.byLabel[lk]; vals != nil {
			remove(vals, lv, k)
			if len(vals) == 0 {
				delete(s.byLabel, lk)
			}
		}
	}
	for _, d := range o.Metadata.GetDependsOn() {
		dk := dependencyKey(d)
		if deps := s.dependents[dk]; deps != nil {
			if i := slices.Index(deps, k); i >= 0 {
				deps[i] = deps[len(deps)-1]
				deps = deps[:len(deps)-1]
			}
			if len(deps) == 0 {
				delete(s.dependents, dk)
			} else {
				s.dependents[dk] = deps
			}
		}
	}
}

// sameIndexed reports whether two versions of one key share every indexed
// field: group, labels and dependsOn.
func sameIndexed(a, b *schemas.ObjectMeta) bool {
	if a.GetGroup() != b.GetGroup() || !maps.Equal(a.GetLabels(), b.GetLabels()) || len(a.GetDependsOn()) != len(b.GetDependsOn()) {
		return false
	}
	for i, d := range a.GetDependsOn() {
		e := b.GetDependsOn()[i]
		if d.GetKind() != e.GetKind() || d.GetNamespace() != e.GetNamespace() || d.GetName() != e.GetName() {
			return false
		}
	}
	return true
}

// dependencyKey is the key a dependsOn entry names. Entries are stored
// resolved (the manifest decoder fills in the namespace), so an empty
// namespace is cluster scope.
func dependencyKey(d *schemas.ObjectKey) Key { return KeyOf(d) }

func add(m map[string]keySet, v string, k Key) {
	set := m[v]
	if set == nil {
		set = keySet{}
		m[v] = set
	}
	set[k] = struct{}{}
}

func remove(m map[string]keySet, v string, k Key) {
	if set := m[v]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(m, v)
		}
	}
}

// BeginBulk starts a bulk load (a replay catching up with the log): until
// EndBulk, Apply keeps only the objects current, and List and Dependents
// scan every object instead of using indexes. A bulk load records no
// changes for watches: afterwards, watches resume from the sequence it
// ended at, and older resourceVersions get ErrGone (list and watch again).
func (s *Store) BeginBulk() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bulk = true
	// Watchers would miss the changes a bulk load does not record; end
	// them now so they resume (and relist) once it is over.
	s.watch.reset(s.seq)
}

// EndBulk ends a bulk load and builds the secondary indexes.
func (s *Store) EndBulk() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.bulk {
		return
	}
	s.bulk = false
	s.rebuild()
	s.watch.floor = s.seq
	if s.onChange != nil {
		s.onChange(Changed{Sequence: s.seq, Resync: true})
	}
}

// Changed is one key's change as a change hook sees it, with the records
// as the store keeps them.
type Changed struct {
	Key Key
	// Prev and Next are the states before and after; Prev is nil for a new
	// key, Next nil for one that left current state.
	Prev, Next *schemas.ObjectRecord
	Sequence   uint64
	// Dependents are the keys whose dependsOn names Key.
	Dependents []Key
	// Resync reports that a bulk load ended: changes were not reported
	// one by one, and anything may have changed.
	Resync bool
}

// OnChange sets the hook called with every change the store folds, in log
// order. It runs with the store locked: it must be quick, must not call the
// store, and must not keep Dependents (the store reuses it).
func (s *Store) OnChange(fn func(Changed)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = fn
}

// rebuild recomputes every secondary index from objects. The caller holds
// s.mu.
func (s *Store) rebuild() {
	objects := s.objects
	fresh := NewStore(StoreOptions{WatchWindow: 1})
	fresh.objects = make(map[Key]*schemas.ObjectRecord, len(objects))
	for k, o := range objects {
		fresh.index(k, o)
	}
	s.objects, s.byKind, s.byNS, s.byGroup, s.byLabel, s.dependents = fresh.objects, fresh.byKind, fresh.byNS, fresh.byGroup, fresh.byLabel, fresh.dependents
}

// Seq is the sequence of the last event applied.
func (s *Store) Seq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq
}

// WaitFor blocks until the store has applied seq or ctx ends.
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	for {
		s.mu.RLock()
		if s.seq >= seq {
			s.mu.RUnlock()
			return nil
		}
		// Under the read lock: the Apply that reaches seq (which takes
		// the write lock) sees it and closes the channel read here.
		s.lowerWaitMin(seq)
		ch := s.notify
		s.mu.RUnlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lowerWaitMin makes waitMin at most seq.
func (s *Store) lowerWaitMin(seq uint64) {
	for {
		cur := s.waitMin.Load()
		if cur != 0 && cur <= seq {
			return
		}
		if s.waitMin.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Get returns the object of key k, or nil.
func (s *Store) Get(k Key) *schemas.Object {
	return ObjectOf(s.GetRecord(k))
}

// GetRecord returns the record of key k (spec still encoded), or nil.
func (s *Store) GetRecord(k Key) *schemas.ObjectRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.objects[k]
}

// Query narrows List. Empty fields match everything. A Kind without a
// group ("Deployment") matches the kind in every group ("Deployment.apps").
type Query struct {
	Kind      string
	Namespace string
	// NamespacePrefix matches namespaces that start with it, such as
	// "prod/" for every object observed in cluster prod (decision 0009).
	NamespacePrefix string
	Group           string
	Labels          Selector
}

func (q Query) matches(k Key, o *schemas.ObjectRecord) bool {
	return kindMatches(q.Kind, k.Kind) &&
		(q.Namespace == "" || k.Namespace == q.Namespace) &&
		strings.HasPrefix(k.Namespace, q.NamespacePrefix) &&
		(q.Group == "" || o.Metadata.GetGroup() == q.Group) &&
		q.Labels.Matches(o.Metadata.GetLabels())
}

// List returns the objects matching q, ordered by key, and the sequence the
// answer is consistent with (a watch from it misses nothing).
func (s *Store) List(q Query) ([]*schemas.Object, uint64) {
	s.mu.RLock()
	keys := s.match(q)
	recs := make([]*schemas.ObjectRecord, len(keys))
	for i, k := range keys {
		recs[i] = s.objects[k]
	}
	seq := s.seq
	s.mu.RUnlock()
	// Specs are decoded outside the lock: records are immutable.
	objs := make([]*schemas.Object, len(recs))
	for i, r := range recs {
		objs[i] = ObjectOf(r)
	}
	return objs, seq
}

// Keys is List without the objects: the keys matching q, ordered, and the
// sequence they are current at.
func (s *Store) Keys(q Query) ([]Key, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.match(q), s.seq
}

// KeysWhere is Keys of those keys keep accepts: keep runs before the
// keys are ordered, so a caller that wants a small part of a kind's keys
// (one partition's) does not pay for ordering all of them while holding
// the store. keep must not call the store.
func (s *Store) KeysWhere(q Query, keep func(Key) bool) ([]Key, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.matchWhere(q, keep), s.seq
}

// match returns the keys matching q, ordered. The caller holds s.mu.
func (s *Store) match(q Query) []Key { return s.matchWhere(q, nil) }

// matchWhere returns the keys matching q that keep (when not nil)
// accepts, ordered. The caller holds s.mu.
func (s *Store) matchWhere(q Query, keep func(Key) bool) []Key {
	keys := s.candidates(q)
	out := make([]Key, 0, len(keys))
	for k := range keys {
		if (keep == nil || keep(k)) && q.matches(k, s.objects[k]) {
			out = append(out, k)
		}
	}
	sortKeys(out)
	return out
}

func sortKeys(keys []Key) {
	slices.SortFunc(keys, func(a, b Key) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
}

func kindMatches(want, kind string) bool {
	if want == "" || want == kind {
		return true
	}
	return !strings.Contains(want, ".") && strings.HasPrefix(kind, want) && len(kind) > len(want) && kind[len(want)] == '.'
}

// candidates picks the smallest index that bounds q's answer.
func (s *Store) candidates(q Query) map[Key]struct{} {
	if s.bulk {
		return s.all()
	}
	best := keySet(nil)
	consider := func(set keySet) {
		if best == nil || len(set) < len(best) {
			best = set
		}
	}
	indexed := false
	if q.Kind != "" {
		if strings.Contains(q.Kind, ".") {
			consider(s.byKind[q.Kind])
		} else {
			set := keySet{}
			for kind, keys := range s.byKind {
				if kindMatches(q.Kind, kind) {
					maps.Copy(set, keys)
				}
			}
			consider(set)
		}
		indexed = true
	}
	if q.Namespace != "" {
		consider(s.byNS[q.Namespace])
		indexed = true
	}
	if q.Group != "" {
		consider(s.byGroup[q.Group])
		indexed = true
	}
	if lk, lv, ok := q.Labels.equality(); ok {
		consider(s.byLabel[lk][lv])
		indexed = true
	}
	if !indexed {
		return s.all()
	}
	if best == nil {
		return keySet{}
	}
	return best
}

func (s *Store) all() keySet {
	all := make(keySet, len(s.objects))
	for k := range s.objects {
		all[k] = struct{}{}
	}
	return all
}

// Dependents returns the keys whose dependsOn names k, ordered.
func (s *Store) Dependents(k Key) []Key {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.bulk {
		var out []Key
		for dk, o := range s.objects {
			for _, d := range o.GetMetadata().GetDependsOn() {
				if dependencyKey(d) == k {
					out = append(out, dk)
				}
			}
		}
		sortKeys(out)
		return out
	}
	out := slices.Clone(s.dependents[k])
	sortKeys(out)
	return out
}

// Len is the number of objects.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.objects)
}

// Snapshot captures the whole state and the sequence it is at. The objects
// are shared with the store (immutable); marshal them, do not modify them.
func (s *Store) Snapshot() *schemas.Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := s.match(Query{})
	snap := &schemas.Snapshot{Sequence: s.seq, Entries: make([]*schemas.SnapshotEntry, len(keys))}
	for i, k := range keys {
		snap.Entries[i] = &schemas.SnapshotEntry{Key: k.Proto(), Object: s.objects[k]}
	}
	return snap
}

// Restore replaces the store's state with a snapshot's.
func (s *Store) Restore(snap *schemas.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects = make(map[Key]*schemas.ObjectRecord, len(snap.GetEntries()))
	for _, e := range snap.GetEntries() {
		s.objects[KeyOf(e.GetKey())] = e.GetObject()
	}
	if !s.bulk {
		s.rebuild()
	}
	s.seq = snap.GetSequence()
	s.watch.reset(s.seq)
	s.waitMin.Store(0)
	close(s.notify)
	s.notify = make(chan struct{})
}
