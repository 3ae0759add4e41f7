package printer

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Table is rows of cells under column headers, printed with every column
// as wide as its widest cell and three spaces between columns.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Write prints the table.
func (t *Table) Write(w io.Writer, noHeaders bool) error {
	widths := make([]int, len(t.Columns))
	if !noHeaders {
		grow(widths, t.Columns)
	}
	for _, r := range t.Rows {
		grow(widths, r)
	}
	var b strings.Builder
	if !noHeaders {
		writeRow(&b, widths, t.Columns)
	}
	for _, r := range t.Rows {
		writeRow(&b, widths, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func grow(widths []int, cells []string) {
	for i, c := range cells {
		if i < len(widths) {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
}

const gap = 3

func writeRow(b *strings.Builder, widths []int, cells []string) {
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(widths[i]-utf8.RuneCountInString(c)+gap, 1)))
		}
	}
	b.WriteByte('\n')
}

// NewTable makes the object table of o's format: table, wide, with labels.
func NewTable(o Options) *Table {
	cols := []string{"NAMESPACE", "KIND", "NAME", "GOAL", "PHASE", "READY", "OBSERVED/GEN", "NEXT RUN", "RESOURCEVERSION", "AGE"}
	if o.Format == "wide" {
		cols = append(cols, "GROUP", "DEPENDSON", "RECONCILER", "MESSAGE")
	}
	if o.ShowLabels {
		cols = append(cols, "LABELS")
	}
	return &Table{Columns: cols}
}

// Add appends obj's row.
func (t *Table) Add(obj *schemas.Object, o Options) {
	t.Rows = append(t.Rows, ObjectRow(obj, o))
}

// ObjectRow is obj's row in the object table of o's format.
func ObjectRow(obj *schemas.Object, o Options) []string {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	m, st := obj.GetMetadata(), obj.GetStatus()
	next := "-"
	if t := st.GetNextRunTime(); t != nil {
		next = "due"
		if t.AsTime().After(now) {
			next = "in " + Age(t.AsTime(), now)
		}
	}
	kind := projections.ObjectKey(obj).Kind
	row := []string{Dash(m.GetNamespace()), kind, m.GetName(), Dash(st.GetGoal()), Dash(st.GetPhase()), Ready(st),
		fmt.Sprintf("%d/%d", st.GetObservedGeneration(), m.GetGeneration()), next, fmt.Sprint(m.GetResourceVersion()), Age(now, m.GetCreationTime().AsTime())}
	if o.Format == "wide" {
		var deps []string
		for _, d := range m.GetDependsOn() {
			deps = append(deps, projections.KeyOf(d).String())
		}
		rec, msg := "?", st.GetMessage()
		if o.Reconciler != nil {
			rec = o.Reconciler(kind)
			if rec == "" {
				rec = "none (stored only)"
			}
		}
		row = append(row, Dash(m.GetGroup()), Dash(strings.Join(deps, ",")), rec, Dash(msg))
	}
	if o.ShowLabels {
		row = append(row, Labels(m.GetLabels()))
	}
	return row
}

// Labels prints labels as k=v,k=v, sorted; <none> when there are none.
func Labels(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, ",")
}

// notReadyPhases are phases in which nothing is ready, whatever a Ready
// condition says: a pod waiting for a scheduler is Pending, and a True
// condition left beside that phase would read as a running pod. The
// console applies the same rule.
var notReadyPhases = map[string]bool{"Pending": true, "Waiting": true, "Registered": true, "ImagePull": true, "ImagePullBackoff": true,
	"Starting": true, "Failed": true, "Error": true, "Finalizing": true, "Terminated": true, "CrashLoopBackoff": true, "NotReady": true}

// Ready is the Ready condition's status, "-" when none was recorded, and
// "False" in a phase in which nothing is ready.
func Ready(st *schemas.Status) string {
	for _, c := range st.GetConditions() {
		if c.GetType() == "Ready" {
			if c.GetStatus() == "True" && notReadyPhases[st.GetPhase()] {
				return "False"
			}
			return c.GetStatus()
		}
	}
	return "-"
}

// Dash is s, or "-" when empty.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Age prints a duration the way kubectl does: 45s, 12m, 3h, 5d.
func Age(now, t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Stream prints rows one at a time, as a watch produces them, with the
// columns aligned across rows: the first flush (header and the first
// batch, such as a list) sets each column's width, with room reserved by
// minWidths, and later rows keep those widths; a cell wider than its
// column shifts the rest of its own row only.
type Stream struct {
	w      io.Writer
	widths []int
	// pending rows are held until the first flush so that the first batch
	// (a list) sets the widths, as a table would.
	pending [][]string
	started bool
}

// NewStream starts a stream under the given header (nil for none).
// minWidths, when given, reserves room for values longer than the first
// rows' (kinds, names).
func NewStream(w io.Writer, header []string, minWidths map[string]int) *Stream {
	s := &Stream{w: w}
	if header != nil {
		s.widths = make([]int, len(header))
		for i, h := range header {
			s.widths[i] = max(utf8.RuneCountInString(h), minWidths[h])
		}
		s.pending = append(s.pending, header)
	}
	return s
}

// Add queues a row; Flush prints what is queued.
func (s *Stream) Add(row []string) {
	if s.widths == nil {
		s.widths = make([]int, len(row))
	}
	s.pending = append(s.pending, row)
}

// Flush prints queued rows.
func (s *Stream) Flush() error {
	if !s.started {
		for _, r := range s.pending {
			grow(s.widths, r)
		}
		s.started = true
	}
	var b strings.Builder
	for _, r := range s.pending {
		writeRow(&b, s.widths, r)
	}
	s.pending = s.pending[:0]
	_, err := io.WriteString(s.w, b.String())
	return err
}
