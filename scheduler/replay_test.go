package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// replayFromLog reads what explain --replay reads, from the log itself.
func replayFromLog(t *testing.T, c *cluster, key projections.Key, profiles map[string]*Profile) (*RecordedDecision, *Decision) {
	t.Helper()
	ctx := context.Background()
	rec, d, err := ReplayFromLog(ctx, c.log, key, profiles)
	if err != nil {
		t.Fatal(err)
	}
	return rec, d
}

func TestReplayReachesTheSameNode(t *testing.T) {
	c := newCluster(t, nil)
	var objs []*schemas.Object
	for i := 0; i < 12; i++ {
		objs = append(objs, fixtureNode(t, fmt.Sprintf("n%02d", i), attrs([]string{"cpu=2", fmt.Sprintf("labels=zone=z%d", i%3)}), 0))
	}
	for i := 0; i < 40; i++ {
		objs = append(objs, fixturePod(t, fmt.Sprintf("default/p%02d", i), attrs([]string{"cpu=300m", "labels=app=web",
			"spread=zone:1:ScheduleAnyway:app=web"}), 0))
	}
	c.apply(objs...)
	// A concurrent burst, so that decisions count assumed pods.
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 40; i += 8 {
				if _, err := c.sched.Schedule(context.Background(), c.pod("default", fmt.Sprintf("p%02d", i))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var keys []projections.Key
	for i := 0; i < 40; i++ {
		keys = append(keys, projections.Key{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("p%02d", i)})
	}
	c.waitBound(keys)

	profiles, _ := DefaultConfig().Build(DefaultRegistry())
	sawAssumed := false
	for _, k := range keys {
		rec, d := replayFromLog(t, c, k, profiles)
		if diff := Differences(rec, d); len(diff) > 0 {
			t.Fatalf("%s: replay differs: %s", k, strings.Join(diff, "; "))
		}
		sawAssumed = sawAssumed || len(rec.Assumed) > 0
	}
	if !sawAssumed {
		t.Log("no decision counted assumed pods in this run")
	}

	// A different plugin configuration is named as the cause.
	cfg, err := ParseConfig([]byte("profiles:\n- schedulerName: jetplane\n  pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := cfg.Build(DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec, d := replayFromLog(t, c, keys[39], other)
	diff := Differences(rec, d)
	if len(diff) == 0 || diff[0] != "plugin NodeResourcesFit changed: builtin/1+MostAllocated, was builtin/1+LeastAllocated" {
		t.Fatalf("differences %q, want the changed plugin first", diff)
	}
}
