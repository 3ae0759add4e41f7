package helmrelease

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// revisionRecord is what a release's status.details records of the
// revision it wrote: its number, a digest of everything its render read
// (chart, values, capabilities), the chart version and the hooks set
// aside. A run that finds the same revision and inputs recorded does not
// render again: random values (randAlphaNum) are drawn once per
// revision, and a restart of jetplane writes nothing.
type revisionRecord struct {
	Revision int
	Inputs   string
	Chart    string
	Hooks    []string
	// Children are the keys of the children the revision wrote.
	Children []string
}

func (r revisionRecord) details() *structpb.Struct {
	hooks := make([]any, len(r.Hooks))
	for i, h := range r.Hooks {
		hooks[i] = h
	}
	children := make([]any, len(r.Children))
	for i, c := range r.Children {
		children[i] = c
	}
	s, _ := structpb.NewStruct(map[string]any{
		"revision": float64(r.Revision), "inputs": r.Inputs, "chart": r.Chart, "hooks": hooks, "children": children,
	})
	return s
}

// recordedRevision reads the record obj's status holds, if any.
func recordedRevision(obj *schemas.Object) revisionRecord {
	f := obj.GetStatus().GetDetails().GetFields()
	rec := revisionRecord{
		Revision: int(f["revision"].GetNumberValue()),
		Inputs:   f["inputs"].GetStringValue(),
		Chart:    f["chart"].GetStringValue(),
	}
	for _, h := range f["hooks"].GetListValue().GetValues() {
		rec.Hooks = append(rec.Hooks, h.GetStringValue())
	}
	for _, c := range f["children"].GetListValue().GetValues() {
		rec.Children = append(rec.Children, c.GetStringValue())
	}
	return rec
}
