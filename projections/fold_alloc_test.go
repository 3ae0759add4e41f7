package projections_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// The live fold, handed the log one event at a time as single-object
// writes arrive, allocates for that event rather than for a whole batch of
// messages at each stage (the read's 512, the fold's 256): the bytes
// allocated per event folded, append included, stay under 20 KiB, and each
// event is folded.
func TestFollowingFoldAllocatesPerEventNotPerBatch(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	live := projections.NewStore(projections.StoreOptions{})
	startProjector(t, projections.ProjectorConfig{Log: l, Store: live})
	step := func(i int) {
		ev := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Actor: "user/test",
			Key:    &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "default", Name: fmt.Sprint("k", i)},
			Object: &schemas.Object{Metadata: &schemas.ObjectMeta{Generation: 1}}}
		waitFor(t, live, appendAll(t, l, []*schemas.Event{ev}))
	}
	const warm, n = 50, 400
	for i := range warm {
		step(i)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := warm; i < warm+n; i++ {
		step(i)
	}
	runtime.ReadMemStats(&m1)
	perEvent := (m1.TotalAlloc - m0.TotalAlloc) / n
	t.Logf("%d bytes allocated per event folded", perEvent)
	if perEvent > 20<<10 {
		t.Fatalf("%d bytes allocated per event folded, want under 20 KiB", perEvent)
	}
	if live.Len() != warm+n {
		t.Fatalf("%d objects folded, want %d", live.Len(), warm+n)
	}
}
