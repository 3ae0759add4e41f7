package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// Concurrent callers of AppendEach are committed together, each entry
// answered with its own outcome: a conflict, a stored retry and a caller
// of several entries stay with their own entries while the rest of their
// group lands, written atomically or pipelined.
func TestAppendEachGroupsCallersAndKeepsOutcomes(t *testing.T) {
	for _, c := range []struct {
		atomicGroups bool
		minAtomic    int
	}{{true, 2}, {true, 0}, {false, 0}} {
		atomicGroups := c.atomicGroups
		t.Run(fmt.Sprintf("atomic=%t/min=%d", atomicGroups, c.minAtomic), func(t *testing.T) {
			l := testenv.Log(t, events.Config{AtomicGroups: atomicGroups, MinAtomicGroup: c.minAtomic})
			ctx := context.Background()
			stored, err := l.Append(ctx, events.Entry{Event: event(key("stored"), "stored-1"), Expect: 0})
			if err != nil {
				t.Fatal(err)
			}
			const distinct, hot, multi = 200, 8, 10
			type call struct {
				entries []events.Entry
				res     []events.Result
				errs    []error
			}
			var calls []*call
			for i := range distinct {
				calls = append(calls, &call{entries: []events.Entry{{Event: event(key(fmt.Sprintf("k-%d", i)), ""), Expect: 0}}})
			}
			for range hot {
				// Each expects the key to be new: one lands, the rest conflict.
				calls = append(calls, &call{entries: []events.Entry{{Event: event(key("hot"), ""), Expect: 0}}})
			}
			for i := range multi {
				calls = append(calls, &call{entries: []events.Entry{
					{Event: event(key(fmt.Sprintf("m-%d-a", i)), ""), Expect: 0},
					{Event: event(key(fmt.Sprintf("m-%d-b", i)), ""), Expect: events.AnyVersion},
				}})
			}
			// A retry of a stored event: answered as a duplicate of it.
			calls = append(calls, &call{entries: []events.Entry{{Event: event(key("stored"), "stored-1"), Expect: events.AnyVersion}}})

			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, c := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					c.res, c.errs = l.AppendEach(ctx, c.entries)
				}()
			}
			close(start)
			wg.Wait()

			seqs := map[uint64]bool{}
			hotLanded := 0
			for _, c := range calls {
				if len(c.res) != len(c.entries) || (c.errs != nil && len(c.errs) != len(c.entries)) {
					t.Fatalf("%d entries: %d results, %d errors", len(c.entries), len(c.res), len(c.errs))
				}
				for i, e := range c.entries {
					var err error
					if c.errs != nil {
						err = c.errs[i]
					}
					name := e.Event.Key.Name
					switch {
					case name == "hot" && errors.Is(err, events.ErrConflict):
					case name == "hot" && err == nil:
						hotLanded++
					case name == "stored":
						if err != nil || !c.res[i].Duplicate || c.res[i].Sequence != stored.Sequence {
							t.Errorf("retry of a stored event: %+v, %v; want a duplicate of %d", c.res[i], err, stored.Sequence)
						}
						continue
					case err != nil:
						t.Errorf("%s: %v", name, err)
						continue
					}
					if err != nil {
						continue
					}
					if seqs[c.res[i].Sequence] {
						t.Errorf("%s: sequence %d given twice", name, c.res[i].Sequence)
					}
					seqs[c.res[i].Sequence] = true
					if v, err := l.KeyVersion(ctx, e.Event.Key); err != nil || v != c.res[i].Sequence {
						t.Errorf("%s: answered %d, the log's last event of it is %d (%v)", name, c.res[i].Sequence, v, err)
					}
				}
			}
			if hotLanded != 1 {
				t.Errorf("%d writes of the hot key landed, want 1", hotLanded)
			}
			want := uint64(1 + distinct + 1 + 2*multi)
			if n, err := l.Count(ctx); err != nil || n != want {
				t.Fatalf("%d events (%v), want %d", n, err, want)
			}
			groups, grouped := l.Groups()
			if atomicGroups && groups == 0 {
				t.Fatal("no group of concurrent callers was written together")
			}
			if refused := l.RefusedGroups(); refused > groups {
				t.Fatalf("%d groups refused of %d", refused, groups)
			}
			t.Logf("%d groups of %d entries, %d refused", groups, grouped, l.RefusedGroups())
		})
	}
}
