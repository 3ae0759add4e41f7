package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
)

func newHistory(g *globals) *cobra.Command {
	var output, ns string
	var diff bool
	cmd := &cobra.Command{
		Use:   "history KIND/NAMESPACE/NAME | KIND NAME",
		Short: "Show every event of one object: who changed what, when, and why",
		Long: `Show the full history of one object from the log, oldest first: each event's
sequence, time, type, actor, what it changed (DETAIL: the fields, with old
and new values where they are short) and cause. History outlives deletion.
--diff prints each event's change to spec, metadata and status as a unified
diff instead; -o json prints the events for tools.

For an Apply, the bridge's observations of the Kubernetes object it manages
(Observed, and Finalized when the object left the cluster) are shown beside
the Apply's own events, with an OBJECT column saying which is which.`,
		Example: `  jetplane history cm/default/settings
  jetplane history deploy web -n shop --diff
  jetplane history ConfigMap/prod/shop/web      # observed in namespace shop of cluster prod
  jetplane history Namespace/shop
  jetplane history Deployment.apps/shop/web -o json
  jetplane history Apply/apps/web                # with the Deployment it manages`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "table", "json", "yaml"); err != nil {
				return err
			}
			var k api.Key
			if len(args) == 2 {
				k = api.Key{Kind: args[0], Namespace: ns, Name: args[1]}
			} else {
				var err error
				if k, err = parseRef(args[0], ns); err != nil {
					return err
				}
			}
			raws, evs, err := history(cmd.Context(), g.client(), k)
			if err != nil {
				return err
			}
			merged := false
			if kindOfEvents(evs) == apply.Kind {
				if ok, have := observedKeyOf(evs); have {
					oraws, oevs, err := history(cmd.Context(), g.client(), ok)
					var apiErr *api.APIError
					if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
						err = nil // never seen in the cluster
					}
					if err != nil {
						return err
					}
					raws, evs = mergeHistories(raws, evs, oraws, oevs)
					merged = true
				}
			}
			w := cmd.OutOrStdout()
			switch {
			case output == "json" || output == "yaml":
				return writeDocs(w, output, raws, output == "json")
			case diff:
				return historyDiff(w, evs)
			}
			return historyTable(w, evs, merged)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, json or yaml")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace, when the reference is KIND/NAME or KIND NAME")
	cmd.Flags().BoolVar(&diff, "diff", false, "print each event's change as a unified diff against the state before it")
	return cmd
}

func kindOfEvents(evs []*schemas.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[0].GetKey().GetKind()
}

// stateView is what history compares between events: the parts of an
// object people change and the status reconcilers write.
type stateView struct {
	Metadata map[string]any `json:"metadata,omitempty"`
	Spec     any            `json:"spec,omitempty"`
	Status   map[string]any `json:"status,omitempty"`
}

func jsonOf(msg proto.Message) map[string]any {
	if msg == nil {
		return nil
	}
	b, err := protojson.Marshal(msg)
	if err != nil {
		return nil
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// specOf is the spec as a JSON tree; nil (not an empty map) when absent.
func specOf(o *schemas.Object) any {
	if m := jsonOf(o.GetSpec()); m != nil {
		return m
	}
	return nil
}

// replay folds one key's events (several keys', for a merged history)
// into views, one per event: the state of that event's key after it.
func replay(evs []*schemas.Event) (before, after []stateView) {
	cur := map[string]stateView{}
	for _, ev := range evs {
		key := ev.GetKey().String()
		prev := cur[key]
		next := stateView{Metadata: prev.Metadata, Spec: prev.Spec, Status: prev.Status}
		o := ev.GetObject()
		switch ev.GetType() {
		case schemas.EventType_EVENT_TYPE_APPLIED, schemas.EventType_EVENT_TYPE_OBSERVED:
			next.Metadata = userMetadata(o.GetMetadata())
			next.Spec = specOf(o)
			if ev.GetType() == schemas.EventType_EVENT_TYPE_OBSERVED {
				next.Status = statusView(o.GetStatus())
			} else if next.Status == nil {
				next.Status = map[string]any{"goal": "exists"}
			}
		case schemas.EventType_EVENT_TYPE_BOUND:
			next.Spec = specOf(o)
		case schemas.EventType_EVENT_TYPE_STATUS_CHANGED:
			next.Status = mergeStatus(prev.Status, statusView(o.GetStatus()))
		case schemas.EventType_EVENT_TYPE_DELETE_REQUESTED:
			next.Status = mergeStatus(prev.Status, map[string]any{"goal": "deleted"})
		case schemas.EventType_EVENT_TYPE_FINALIZED:
			next = stateView{}
		}
		before = append(before, prev)
		after = append(after, next)
		cur[key] = next
	}
	return before, after
}

// userMetadata keeps the metadata people write (labels, annotations,
// dependsOn, group, finalizers), not what the gate assigns.
func userMetadata(m *schemas.ObjectMeta) map[string]any {
	all := jsonOf(m)
	out := map[string]any{}
	for _, k := range []string{"labels", "annotations", "dependsOn", "group", "finalizers"} {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// statusView is the status without nextRunTime, which changes on every
// run and says nothing about what happened.
func statusView(st *schemas.Status) map[string]any {
	m := jsonOf(st)
	delete(m, "nextRunTime")
	if conds, ok := m["conditions"].([]any); ok {
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok {
				delete(cm, "lastTransitionTime")
			}
		}
	}
	return m
}

func mergeStatus(prev, next map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range prev {
		if k == "goal" {
			out[k] = v
		}
	}
	for k, v := range next {
		out[k] = v
	}
	return out
}

func (v stateView) generic() any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// historyTable prints events; withKey adds an OBJECT column, for histories
// of more than one key.
func historyTable(w io.Writer, evs []*schemas.Event, withKey bool) error {
	// Causes are event ids; show the sequence when the cause is in view.
	seqOf := map[string]uint64{}
	for _, ev := range evs {
		seqOf[ev.GetId()] = ev.GetSequence()
	}
	t := &printer.Table{Columns: []string{"SEQ", "TIME", "TYPE", "ACTOR", "GENERATION", "DETAIL", "CAUSE"}}
	if withKey {
		t.Columns = append([]string{"OBJECT"}, t.Columns...)
	}
	before, after := replay(evs)
	for i, ev := range evs {
		cause := ev.GetCause()
		if seq, ok := seqOf[cause]; ok {
			cause = fmt.Sprintf("#%d", seq)
		}
		row := []string{fmt.Sprint(ev.GetSequence()), ev.GetTime().AsTime().UTC().Format(time.RFC3339),
			eventType(ev.GetType()), ev.GetActor(), generation(ev), printer.Dash(changeDetail(ev, before[i], after[i])), printer.Dash(cause)}
		if withKey {
			k := ev.GetKey()
			row = append([]string{k.GetKind() + "/" + k.GetNamespace() + "/" + k.GetName()}, row...)
		}
		t.Rows = append(t.Rows, row)
	}
	return t.Write(w, false)
}

// changeDetail says what an event changed: the changed fields, shortened.
func changeDetail(ev *schemas.Event, before, after stateView) string {
	switch ev.GetType() {
	case schemas.EventType_EVENT_TYPE_FINALIZED:
		return "left current state"
	case schemas.EventType_EVENT_TYPE_DELETE_REQUESTED:
		// A Foreground or Orphan deletion carries its finalizer.
		if f := ev.GetObject().GetMetadata().GetFinalizers(); len(f) > 0 {
			return "goal: exists→deleted, finalizers: " + strings.Join(f, ",")
		}
		return "goal: exists→deleted"
	}
	var prev any
	if before.Metadata != nil || before.Spec != nil || before.Status != nil {
		prev = before.generic()
	} else {
		prev = map[string]any{}
	}
	paths := printer.ChangedPaths(prev, after.generic())
	if len(paths) == 0 {
		return "no change"
	}
	if ev.GetType() == schemas.EventType_EVENT_TYPE_APPLIED && before.Metadata == nil && before.Spec == nil && before.Status == nil {
		return "created"
	}
	const maxLen = 80
	paths = phaseFirst(paths, before, after)
	var b strings.Builder
	n := 0 // runes written: DETAIL is measured as a terminal shows it
	for i, p := range paths {
		p = cutRunes(p, 40)
		l := utf8.RuneCountInString(p)
		if i > 0 {
			if n+l+2 > maxLen {
				fmt.Fprintf(&b, " (+%d more)", len(paths)-i)
				break
			}
			b.WriteString(", ")
			n += 2
		}
		b.WriteString(p)
		n += l
	}
	return b.String()
}

// phaseFirst puts the change of status.phase first, as "phase: A→B"
// ("phase: B" when there was none): the state a pod or workload moved to
// is what a reader looks for, and sorted paths would bury it among the
// details.
func phaseFirst(paths []string, before, after stateView) []string {
	was, _ := before.Status["phase"].(string)
	now, _ := after.Status["phase"].(string)
	var out []string
	if was != now && now != "" {
		out = append(out, "phase: "+now)
		if was != "" {
			out[0] = "phase: " + was + "→" + now
		}
	}
	// A pod's phase is Kubernetes' (Pending, Running, ...); the state its
	// agent entered (Registered, ImagePull, ...) is its Ready reason, and
	// the states it passed through since its last event (one event may
	// record several, decision 0089) stand between the two.
	if ws, ns := podState(before), podState(after); ns != "" && ws != ns {
		chain := append(podPassed(after), ns)
		if ws != "" {
			chain = append([]string{ws}, chain...)
		}
		out = append(out, "state: "+strings.Join(chain, "→"))
	}
	if len(out) == 0 {
		return paths
	}
	for _, p := range paths {
		if p != "status.phase" && !strings.HasPrefix(p, "status.phase:") && !strings.HasPrefix(p, "status.phase ") {
			out = append(out, p)
		}
	}
	return out
}

// podPassed is the states a pod's status says it passed before the one
// it reports, earliest first.
func podPassed(v stateView) []string {
	conds, _ := v.Status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == pod.ConditionPassed {
			if msg, _ := m["message"].(string); msg != "" {
				return strings.Split(msg, ", ")
			}
		}
	}
	return nil
}

// podState is the state a pod's agent reported (the Ready condition's
// reason; "" for objects whose status has no Kubernetes v1 details).
func podState(v stateView) string {
	det, _ := v.Status["details"].(map[string]any)
	if _, ok := det["containerStatuses"]; !ok {
		return ""
	}
	conds, _ := v.Status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

// cutRunes shortens s to at most n runes, ending in "..." when cut; it
// never splits a UTF-8 character.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// historyDiff prints each event as a header and the unified diff of the
// state it changed.
func historyDiff(w io.Writer, evs []*schemas.Event) error {
	before, after := replay(evs)
	for i, ev := range evs {
		fmt.Fprintf(w, "# %d  %s  %s  by %s\n", ev.GetSequence(), ev.GetTime().AsTime().UTC().Format(time.RFC3339), eventType(ev.GetType()), ev.GetActor())
		a, err := viewYAML(before[i])
		if err != nil {
			return err
		}
		b, err := viewYAML(after[i])
		if err != nil {
			return err
		}
		d := printer.Unified(fmt.Sprintf("before #%d", ev.GetSequence()), fmt.Sprintf("after #%d", ev.GetSequence()), a, b)
		if d == "" {
			d = "(no change to spec, metadata or status)\n"
		}
		if _, err := io.WriteString(w, d+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func viewYAML(v stateView) (string, error) {
	if v.Metadata == nil && v.Spec == nil && v.Status == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	y, err := printer.ToYAML(b)
	return string(y), err
}
