package gate_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
)

// groupCountingLog is the real log without its own group commit
// (events.Log.AppendEach), so that the gate groups; it counts the atomic
// batches of more than one entry it was asked to write and the entries in
// them.
type groupCountingLog struct {
	gate.Log
	async interface {
		AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
	}
	groups, grouped atomic.Int64
}

func (g *groupCountingLog) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	return g.async.AppendAsync(ctx, entries)
}

func (g *groupCountingLog) AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error) {
	if len(entries) > 1 {
		g.groups.Add(1)
		g.grouped.Add(int64(len(entries)))
	}
	return g.Log.AppendBatch(ctx, entries)
}

// Concurrent single-object applies are committed together, each answered
// with its own outcome; those that race on one object conflict alone and
// are retried, while the others in their group land. The log groups them
// (events.Log.AppendEach) or, on a log that cannot, the gate does.
func TestGroupCommitOfSingleObjectApplies(t *testing.T) {
	for _, c := range []struct {
		atomicGroups, byLog bool
	}{{true, true}, {false, true}, {true, false}, {false, false}} {
		atomicGroups := c.atomicGroups
		t.Run(fmt.Sprintf("atomic=%t/by-log=%t", c.atomicGroups, c.byLog), func(t *testing.T) {
			e := newEnv(t)
			var log gate.Log
			counting := &groupCountingLog{Log: e.log.Log, async: e.log.Log}
			log = counting
			var byLog *events.Log
			if c.byLog {
				// The same stream, grouped by the log itself.
				l, err := events.Open(context.Background(), e.log.Conn(), events.Config{AtomicGroups: atomicGroups})
				if err != nil {
					t.Fatal(err)
				}
				log, byLog = l, l
			}
			g, err := gate.New(gate.Config{Log: log, State: e.store, AtomicGroups: atomicGroups, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			const distinct, hot = 200, 4
			var wg sync.WaitGroup
			errs := make(chan error, distinct+hot)
			for i := range distinct + hot {
				name, data := fmt.Sprintf("cm-%d", i), "a: '1'"
				if i >= distinct {
					// A few writers of one object (fewer than the gate's attempts
					// at a write): their writes conflict
					// with each other, never with the others'.
					name, data = "hot", fmt.Sprintf("a: '%d'", i)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					out, err := g.Apply(context.Background(), gate.Admin("tester"), decode(t, configMap(name, "app: web", data)), "")
					if err == nil && (len(out) != 1 || out[0].Key.Name != name || out[0].Object == nil) {
						err = fmt.Errorf("%s: outcome %+v", name, out)
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for i := range distinct {
				if e.store.Get(projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}) == nil {
					t.Fatalf("cm-%d missing", i)
				}
			}
			// Every write of the hot object landed, one after another.
			if n := e.count(t); n != distinct+hot {
				t.Fatalf("%d events, want %d (one per apply)", n, distinct+hot)
			}
			groups, grouped := counting.groups.Load(), counting.grouped.Load()
			if byLog != nil {
				groups, grouped = byLog.Groups()
			}
			if atomicGroups && groups == 0 {
				t.Fatal("no group of concurrent applies was committed together")
			}
			t.Logf("%d groups of %d entries", groups, grouped)
		})
	}
}
