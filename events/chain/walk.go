package chain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Break is one place where the stored log is not the log that was
// written: a range of sequences that is missing, unreadable or changed.
type Break struct {
	Kind BreakKind `json:"kind"`
	// First and Last are the sequences affected (Last 0: to the end of
	// what is known).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// File and Offset say where in the store (empty for a log cut short
	// at its end).
	File   string `json:"file,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Detail string `json:"detail"`
}

// BreakKind classifies a Break.
type BreakKind string

const (
	// Missing sequences: a gap between events, or blocks deleted.
	Missing BreakKind = "missing"
	// Unreadable bytes: records that fail their checksum or do not parse.
	Unreadable BreakKind = "unreadable"
	// Changed history: the recomputed head differs from a signed one.
	Changed BreakKind = "changed"
	// Short log: the log ends before a sequence it once held.
	Short BreakKind = "short"
)

func (b Break) Error() string {
	r := fmt.Sprintf("sequence %d", b.First)
	if b.Last > b.First {
		r = fmt.Sprintf("sequences %d-%d", b.First, b.Last)
	} else if b.Last == 0 {
		r = fmt.Sprintf("sequences from %d", b.First)
	}
	s := fmt.Sprintf("%s: %s", b.Kind, r)
	if b.File != "" {
		s += fmt.Sprintf(" (%s, offset %d)", b.File, b.Offset)
	}
	if b.Detail != "" {
		s += ": " + b.Detail
	}
	return s
}

// Walker computes the chain over a Store in sequence order, from where it
// stopped last: the running check calls Step every second, a full check
// walks once from the start. A Walker is not safe for concurrent use.
type Walker struct {
	store *Store
	h     *Hasher
	// Next is the sequence the walk expects next; Head is h_{Next-1}.
	Next uint64
	Head Head
	// Events counts the events chained so far.
	Events uint64

	block  uint32 // block being read (0: none yet)
	off    int64  // offset of the first record not yet read in it
	buf    []byte
	broken bool // a break was found: later heads are not comparable
}

// NewWalker starts a walk that expects sequence next after head (1 and
// the zero head for the whole log).
func NewWalker(s *Store, next uint64, head Head) *Walker {
	if next == 0 {
		next = 1
	}
	return &Walker{store: s, h: NewHasher(), Next: next, Head: head}
}

// Broken reports whether the walk found a break: heads after it are not
// the log's and must not be signed.
func (w *Walker) Broken() bool { return w.broken }

// Step chains every whole event stored beyond the walk's position, calling
// at (when not nil) with each sequence and its head, and returns the breaks
// it found. Events before Next are read and skipped (verifying from a
// later sequence). With final, the files are complete (no server writes
// them): a record cut short at the end of the last block is reported, not
// waited for.
func (w *Walker) Step(final bool, at func(seq uint64, h Head) error) ([]Break, error) {
	blocks, err := w.store.Blocks()
	if err != nil {
		return nil, err
	}
	var breaks []Break
	add := func(b Break) {
		breaks = append(breaks, b)
		w.broken = true
	}
	// A block the walk has read is gone: its events are lost.
	if w.block != 0 && !hasBlock(blocks, w.block) {
		add(Break{Kind: Missing, First: w.Next, File: filepath.Join(w.store.Dir, fmt.Sprintf("%d.blk", w.block)),
			Detail: "the block file being read was removed"})
		w.block, w.off = 0, 0
	}
	prevIndex := w.block
	// gone names block files missing before the one being read; the gap
	// in sequences they leave carries it.
	gone, goneFrom := "", uint32(0)
	for bi, b := range blocks {
		if b.Index < w.block {
			continue
		}
		if b.Index != w.block {
			switch {
			case prevIndex == 0 && w.Next == 1 && b.Index > 1:
				gone, goneFrom = fmt.Sprintf("block files 1.blk to %d.blk are missing", b.Index-1), 1
			case prevIndex != 0 && b.Index > prevIndex+1:
				gone, goneFrom = fmt.Sprintf("block files %d.blk to %d.blk are missing", prevIndex+1, b.Index-1), prevIndex+1
			}
			w.block, w.off = b.Index, 0
		}
		prevIndex = b.Index
		if size, err := fileSize(b); err == nil && size < w.off {
			add(Break{Kind: Short, First: w.Next, File: b.Path, Offset: size,
				Detail: fmt.Sprintf("the file was cut to %d bytes; %d had been read", size, w.off)})
			return breaks, nil
		}
		if w.buf, err = readFrom(b, w.off, w.buf); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return breaks, err
		}
		n, bad, err := w.store.Records(b, w.buf, w.off, func(e Event, off int64) error {
			if e.Seq < w.Next {
				return nil
			}
			if e.Seq > w.Next {
				br := Break{Kind: Missing, First: w.Next, Last: e.Seq - 1, File: b.Path, Offset: off,
					Detail: fmt.Sprintf("the log goes on at sequence %d here", e.Seq)}
				if gone != "" {
					br.File, br.Offset = filepath.Join(w.store.Dir, fmt.Sprintf("%d.blk", goneFrom)), 0
					br.Detail = gone + "; " + br.Detail
				}
				add(br)
			}
			gone = ""
			w.Head = w.h.Next(w.Head, e)
			w.Next = e.Seq + 1
			w.Events++
			if at != nil {
				return at(e.Seq, w.Head)
			}
			return nil
		})
		w.off += int64(n)
		if err != nil {
			return breaks, err
		}
		last := bi == len(blocks)-1
		if bad != nil {
			if bad.Torn && last && !final {
				return breaks, nil // a write in progress: read on next time
			}
			if bad.Torn && last {
				// A record cut short at the very end: what a crash leaves
				// of a write never acknowledged when the process died
				// mid-write, or a file cut short; Short says which.
				return breaks, nil
			}
			br := Break{Kind: Unreadable, First: w.Next, File: bad.File, Offset: bad.Offset, Detail: bad.Reason}
			if !last {
				if first, ok := w.firstSeq(blocks[bi+1]); ok && first > w.Next {
					br.Last = first - 1
				}
			}
			add(br)
			// Skip the rest of this block: the next block's events go on.
			w.off += int64(len(w.buf) - n)
			if br.Last != 0 {
				// The next block starts where the unreadable range ends;
				// it is not a second break.
				w.Next = br.Last + 1
			}
			continue
		}
	}
	return breaks, nil
}

// firstSeq is the sequence of the first event of b.
func (w *Walker) firstSeq(b Block) (uint64, bool) {
	buf, err := readFrom(b, 0, nil)
	if err != nil {
		return 0, false
	}
	var first uint64
	stop := errors.New("stop")
	_, _, _ = w.store.Records(b, buf, 0, func(e Event, _ int64) error { first = e.Seq; return stop })
	return first, first != 0
}

func fileSize(b Block) (int64, error) {
	fi, err := os.Stat(b.Path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Block is the index of the block file the walk reads now (0: none).
func (w *Walker) Block() uint32 { return w.block }

func hasBlock(bs []Block, i uint32) bool {
	for _, b := range bs {
		if b.Index == i {
			return true
		}
	}
	return false
}

// Store is the store the walk reads.
func (w *Walker) Store() *Store { return w.store }
