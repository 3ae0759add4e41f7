package helmrelease

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// revisionRecord is what a release's status.details records of the
// revision it wrote: its number, a digest of everything its render read
// (chart, values, capabilities), the chart version and the hooks jetplane
// does not run. A run that finds the same revision and inputs recorded,
// its stage done, does not render again: random values (randAlphaNum) are
// drawn once per revision, and a restart of jetplane writes nothing.
//
// While a revision rolls out, Stage names where it is (a hook event such
// as "pre-upgrade", or "write"), Hook and Step which hook of the stage
// runs and how far it got, so that the next run goes on from there.
type revisionRecord struct {
	Revision int
	Inputs   string
	Chart    string
	Hooks    []string
	// Children are the keys of the children the revision wrote.
	Children []string
	// Event is the event the revision rolls out as: install, upgrade,
	// rollback (or delete while the release is deleted).
	Event string
	Stage string
	Hook  int
	Step  string
	// Since is when the running hook was created (RFC 3339).
	Since string
	// Failed is the hook failure that ended the revision.
	Failed string
	// Tested is the last test request (AnnotationTest) run; Tests the
	// outcome of each test hook ("Kind/ns/name: Succeeded").
	Tested     string
	TestPhase  string
	Tests      []string
	TestStart  string
	TestFinish string
}

// Stages besides hook events.
const (
	stageWrite = "write" // write the revision's children
	// stageApplied waits until a cluster holds every child.
	stageApplied = "applied"
	stageGone    = "delete" // wait for the children to be deleted
	// stageDeleted: the post-delete hooks are over; finalize.
	stageDeleted = "deleted"
)

func strList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (r revisionRecord) details() *structpb.Struct {
	m := map[string]any{
		"revision": float64(r.Revision), "inputs": r.Inputs, "chart": r.Chart, "hooks": strList(r.Hooks), "children": strList(r.Children),
	}
	for k, v := range map[string]string{"event": r.Event, "stage": r.Stage, "step": r.Step, "since": r.Since, "failed": r.Failed, "tested": r.Tested,
		"testPhase": r.TestPhase, "testStarted": r.TestStart, "testCompleted": r.TestFinish} {
		if v != "" {
			m[k] = v
		}
	}
	if r.Hook > 0 {
		m["hook"] = float64(r.Hook)
	}
	if len(r.Tests) > 0 {
		m["tests"] = strList(r.Tests)
	}
	s, _ := structpb.NewStruct(m)
	return s
}

// recordedRevision reads the record obj's status holds, if any.
func recordedRevision(obj *schemas.Object) revisionRecord {
	return recordOf(obj.GetStatus().GetDetails())
}

func recordOf(d *structpb.Struct) revisionRecord {
	f := d.GetFields()
	list := func(name string) []string {
		var out []string
		for _, v := range f[name].GetListValue().GetValues() {
			out = append(out, v.GetStringValue())
		}
		return out
	}
	return revisionRecord{
		Revision:   int(f["revision"].GetNumberValue()),
		Inputs:     f["inputs"].GetStringValue(),
		Chart:      f["chart"].GetStringValue(),
		Hooks:      list("hooks"),
		Children:   list("children"),
		Event:      f["event"].GetStringValue(),
		Stage:      f["stage"].GetStringValue(),
		Hook:       int(f["hook"].GetNumberValue()),
		Step:       f["step"].GetStringValue(),
		Since:      f["since"].GetStringValue(),
		Failed:     f["failed"].GetStringValue(),
		Tested:     f["tested"].GetStringValue(),
		TestPhase:  f["testPhase"].GetStringValue(),
		Tests:      list("tests"),
		TestStart:  f["testStarted"].GetStringValue(),
		TestFinish: f["testCompleted"].GetStringValue(),
	}
}
