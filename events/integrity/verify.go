package integrity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetplane/jetplane/events/chain"
)

// Report is the outcome of checking the stored log against the chain and
// the checkpoints.
type Report struct {
	Stream string `json:"stream"`
	// From is the first sequence chained (1, or just past the checkpoint a
	// verify from a later sequence started at).
	From uint64 `json:"from"`
	// Last is the last sequence read and Head the chain head after it.
	Last uint64     `json:"last"`
	Head chain.Head `json:"head"`
	// Events counts the events chained.
	Events uint64 `json:"events"`
	// Checkpoint is the latest checkpoint the log was held to, if any;
	// Matched counts the checkpoints whose heads the log reproduced.
	Checkpoint *Checkpoint   `json:"checkpoint,omitempty"`
	Matched    int           `json:"matched"`
	Breaks     []chain.Break `json:"breaks,omitempty"`
	Elapsed    time.Duration `json:"elapsed"`
	// HeadAt is the head after VerifyOptions.HeadAt, when the log reached it.
	HeadAt *chain.Head `json:"headAt,omitempty"`

	w *chain.Walker // where the walk stopped, for the running check to go on
}

// OK reports a log without breaks.
func (r Report) OK() bool { return len(r.Breaks) == 0 }

// Err is nil for a whole log, else an error naming every break (up to a
// few) and what to do.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return &DamageError{Report: r}
}

// DamageError is a log that is not the log that was written.
type DamageError struct{ Report Report }

func (e *DamageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the log %s is damaged", e.Report.Stream)
	for i, br := range e.Report.Breaks {
		if i == 4 {
			fmt.Fprintf(&b, "; and %d more", len(e.Report.Breaks)-i)
			break
		}
		fmt.Fprintf(&b, "; %s", br.Error())
	}
	return b.String()
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// From starts at the latest checkpoint before this sequence instead of
	// at sequence 1 (events before it are only checked for their store
	// checksums and order).
	From uint64
	// Live, when set, is the running instance's own last head: a log
	// shorter than it, or different up to it, is damaged too.
	Live *Checkpoint
	// Running: a server may be writing the files (a record cut short at
	// the end is a write in progress).
	Running bool
	// HeadAt asks for the head after this sequence (Report.HeadAt).
	HeadAt uint64
}

// Verify walks the stored log in store, holding it to cps (oldest first,
// their signatures already checked). A store without the stream's files
// is an empty log.
func Verify(store *chain.Store, stream string, cps []Checkpoint, o VerifyOptions) (Report, error) {
	start := time.Now()
	if o.Live != nil {
		cps = append(append([]Checkpoint(nil), cps...), *o.Live)
	}
	r := Report{Stream: stream, From: 1}
	if n := len(cps); n > 0 {
		last := cps[n-1]
		r.Checkpoint = &last
	}
	heads := make(map[uint64]chain.Head, len(cps))
	for _, c := range cps {
		h, err := chain.ParseHead(c.Head)
		if err != nil {
			return r, err
		}
		heads[c.Seq] = h
	}
	next, head := uint64(1), chain.Head{}
	if o.From > 1 {
		for _, c := range cps {
			if c.Seq < o.From {
				next, head = c.Seq+1, heads[c.Seq]
			}
		}
		r.From = next
	}
	if store == nil {
		r.Last = next - 1
		r.shortAgainst(cps)
		r.Elapsed = time.Since(start)
		return r, nil
	}
	w := chain.NewWalker(store, next, head)
	lastGood := next - 1
	breaks, err := w.Step(!o.Running, func(seq uint64, h chain.Head) error {
		if seq == o.HeadAt {
			hh := h
			r.HeadAt = &hh
		}
		want, ok := heads[seq]
		if !ok {
			return nil
		}
		if want == h {
			r.Matched++
			lastGood = seq
			return nil
		}
		if !w.Broken() {
			r.Breaks = append(r.Breaks, chain.Break{Kind: chain.Changed, First: lastGood + 1, Last: seq,
				Detail: fmt.Sprintf("the events hash to %s, the checkpoint signed %s; some of them were changed, removed or reordered", h, want)})
		}
		lastGood = seq
		return nil
	})
	if err != nil {
		return r, err
	}
	r.Breaks = append(breaks, r.Breaks...)
	r.Last, r.Head, r.Events, r.w = w.Next-1, w.Head, w.Events, w
	r.shortAgainst(cps)
	if n := len(r.Breaks); n > 0 && r.Breaks[n-1].Kind == chain.Short && r.Breaks[n-1].File == "" {
		// Name the file the log ends in, and the files missing after it.
		if bs, err := store.Blocks(); err == nil && len(bs) > 0 {
			lastBlock := bs[len(bs)-1]
			r.Breaks[n-1].File = lastBlock.Path
			if fi, err := os.Stat(lastBlock.Path); err == nil {
				r.Breaks[n-1].Offset = fi.Size() // where the log ends
			}
			if cp := r.Checkpoint; cp != nil && cp.Block > lastBlock.Index {
				r.Breaks[n-1].File = filepath.Join(store.Dir, fmt.Sprintf("%d.blk", lastBlock.Index+1))
				r.Breaks[n-1].Detail += fmt.Sprintf("; block files %d.blk to %d.blk are missing", lastBlock.Index+1, cp.Block)
			}
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// shortAgainst adds a break when the log ends before the last checkpoint.
func (r *Report) shortAgainst(cps []Checkpoint) {
	if len(cps) == 0 {
		return
	}
	last := cps[len(cps)-1]
	if r.Last >= last.Seq {
		return
	}
	if n := len(r.Breaks); n > 0 && r.Breaks[n-1].Last == 0 {
		// An unreadable or missing range to the end: now its end is known.
		r.Breaks[n-1].Last = last.Seq
		return
	}
	r.Breaks = append(r.Breaks, chain.Break{Kind: chain.Short, First: r.Last + 1, Last: last.Seq,
		Detail: fmt.Sprintf("the log ends at sequence %d; this instance held up to %d at %s", r.Last, last.Seq, last.Time.Format(time.RFC3339))})
}

// OpenStore is chain.Open, with a store that holds no stream yet as nil.
func OpenStore(storeDir, stream string) (*chain.Store, error) {
	s, err := chain.Open(storeDir, stream)
	if errors.Is(err, chain.ErrNoStream) {
		return nil, nil
	}
	return s, err
}
