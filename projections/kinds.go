package projections

import "sort"

// noteKind records that an event of kind was folded. The caller holds s.mu.
func (s *Store) noteKind(kind string) {
	if _, ok := s.kinds[kind]; ok {
		return
	}
	if s.kinds == nil {
		s.kinds = map[string]struct{}{}
	}
	s.kinds[kind] = struct{}{}
}

// Kinds lists, sorted, every kind the store holds objects of or has folded
// events of since it was made (or restored: a snapshot brings the kinds of
// its objects once indexed). Kind names resolve against it, so a kind whose objects were
// all deleted is still known by name to history.
func (s *Store) Kinds() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	set := make(map[string]struct{}, len(s.kinds))
	for k := range s.kinds {
		set[k] = struct{}{}
	}
	for k := range s.byKind {
		set[k] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
