package reconcilers

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
)

// wire records the acknowledgements an ackFrontier sends.
type wire struct {
	mu   sync.Mutex
	seqs []uint64
}

func (w *wire) delivery(seq uint64) events.Delivery {
	d := events.Delivery{Message: events.Message{Sequence: seq}}
	return d.OnAck(func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seqs = append(w.seqs, seq)
		return nil
	})
}

func (w *wire) sent() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seqs)
}

// The frontier acknowledges a delivery only once every earlier one is
// done, and one acknowledgement covers the deliveries done together.
func TestAckFrontierCoversOnlyDoneDeliveries(t *testing.T) {
	tests := []struct {
		name  string
		track []uint64 // in the order handed out
		done  []uint64
		want  uint64 // the newest acknowledged; 0 for none
	}{
		{name: "in order", track: []uint64{1, 2, 3}, done: []uint64{1, 2, 3}, want: 3},
		{name: "a later one done first waits", track: []uint64{1, 2, 3}, done: []uint64{2, 3}, want: 0},
		{name: "the head done last releases all", track: []uint64{1, 2, 3}, done: []uint64{3, 2, 1}, want: 3},
		{name: "stops at the first not done", track: []uint64{1, 2, 3, 4}, done: []uint64{1, 2, 4}, want: 2},
		{name: "gaps in sequences", track: []uint64{5, 9, 12}, done: []uint64{9, 5}, want: 9},
		{name: "a delivery sent again in its place", track: []uint64{4, 6, 5}, done: []uint64{4, 6}, want: 4},
		{name: "a delivery sent again, then done", track: []uint64{4, 6, 5}, done: []uint64{4, 6, 5}, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &wire{}
			f := newAckFrontier()
			handed := map[uint64]events.Delivery{}
			for _, s := range tt.track {
				handed[s] = f.track(w.delivery(s))
			}
			for _, s := range tt.done {
				if err := handed[s].Ack(); err != nil {
					t.Fatal(err)
				}
			}
			if tt.want == 0 {
				f.flush()
				if got := w.sent(); len(got) != 0 {
					t.Fatalf("acknowledged %v; want nothing while an earlier delivery runs", got)
				}
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				got := w.sent()
				if len(got) > 0 {
					if len(got) != 1 || got[0] != tt.want {
						t.Fatalf("acknowledged %v; want one acknowledgement, of %d", got, tt.want)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing acknowledged; want %d", tt.want)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// A delivery the log sends again after it was acknowledged is not waited
// for.
func TestAckFrontierSkipsWhatItAcknowledged(t *testing.T) {
	w := &wire{}
	f := newAckFrontier()
	_ = f.track(w.delivery(1)).Ack()
	f.flush()
	again := f.track(w.delivery(1))
	two := f.track(w.delivery(2))
	_ = two.Ack()
	f.flush()
	if got := w.sent(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("acknowledged %v, want [1 2]", got)
	}
	_ = again.Ack()
}
