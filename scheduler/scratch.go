package scheduler

import "sync"

// Scratch recycles the slices a cycle needs only while it runs (scores,
// statuses, node lists of a chunk): at thousands of nodes they are most of
// what a cycle allocates, and the garbage collector's work grows with
// every byte allocated. Safe for concurrent use.
type Scratch[T any] struct{ pool sync.Pool }

// Get returns a zeroed slice of length n.
func (s *Scratch[T]) Get(n int) []T {
	if p, ok := s.pool.Get().(*[]T); ok && cap(*p) >= n {
		b := (*p)[:n]
		clear(b)
		return b
	}
	return make([]T, n)
}

// Put gives b back; the caller keeps no reference to it.
func (s *Scratch[T]) Put(b []T) {
	if cap(b) == 0 {
		return
	}
	s.pool.Put(&b)
}

var (
	scratchInts     Scratch[int]
	scratchInt64s   Scratch[int64]
	scratchUint64s  Scratch[uint64]
	scratchStrings  Scratch[string]
	scratchScores   Scratch[NodeScore]
	scratchNodes    Scratch[*NodeInfo]
	scratchStatuses Scratch[*Status]
)
