package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
	"github.com/jetplane/jetplane/schemas"
)

func newDescribe(g *globals) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "describe (KIND/NAMESPACE/NAME | KIND NAME)",
		Short: "Explain one object: spec, status and conditions, dependencies, dependents, last events, reconciler",
		Long: `Show one object the way a person reads it: metadata, a summary of the spec,
the status with its conditions and message, each dependsOn entry with its
readiness, the objects that depend on it, its last events from the log, and
what reconciles it ("no reconciler: stored only" when nothing does, which is
why such objects' PHASE stays -).`,
		Example: `  jetplane describe deploy/shop/web
  jetplane describe cm settings -n shop`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var k api.Key
			if len(args) == 2 {
				k = api.Key{Kind: args[0], Namespace: ns, Name: args[1]}
			} else {
				var err error
				if k, err = parseRef(args[0], ns); err != nil {
					return err
				}
			}
			c := g.client()
			if k.Namespace == "" && ns == "" {
				// Look the name up in every namespace, as get does.
				it, err := getOne(cmd.Context(), c, k, false)
				if err != nil {
					return err
				}
				k.Namespace = it.Object.GetMetadata().GetNamespace()
			}
			d, err := c.Describe(cmd.Context(), k)
			if err != nil {
				return err
			}
			return printDescribe(cmd.OutOrStdout(), d, time.Now())
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace, when the reference is KIND/NAME or KIND NAME")
	return cmd
}

func printDescribe(w io.Writer, d *api.DescribeResponse, now time.Time) error {
	o, err := api.DecodeObject(d.Object)
	if err != nil {
		return err
	}
	m, st := o.GetMetadata(), o.GetStatus()
	var b strings.Builder
	field := func(indent int, name string, value any) {
		fmt.Fprintf(&b, "%s%-*s %v\n", strings.Repeat("  ", indent), 20-2*indent, name+":", value)
	}
	field(0, "Name", m.GetName())
	field(0, "Namespace", printer.Dash(m.GetNamespace()))
	field(0, "Kind", kindOf(o))
	field(0, "Labels", printer.Labels(m.GetLabels()))
	field(0, "Annotations", printer.Labels(m.GetAnnotations()))
	field(0, "Group", printer.Dash(m.GetGroup()))
	field(0, "UID", m.GetUid())
	field(0, "Generation", m.GetGeneration())
	field(0, "ResourceVersion", m.GetResourceVersion())
	if t := m.GetCreationTime(); t != nil {
		field(0, "Created", fmt.Sprintf("%s (%s ago)", t.AsTime().UTC().Format(time.RFC3339), printer.Age(now, t.AsTime())))
	}
	if d.Reconciler != "" {
		field(0, "Reconciled by", d.Reconciler)
	} else {
		field(0, "Reconciled by", "no reconciler: stored only (jetplane records it and its history; nothing writes its status, so PHASE stays -)")
	}
	b.WriteString("Spec:\n")
	if spec := o.GetSpec(); spec != nil && len(spec.GetFields()) > 0 {
		raw, _ := json.Marshal(spec.AsMap())
		y, err := printer.ToYAML(raw)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			b.WriteString("  " + line + "\n")
		}
	} else {
		b.WriteString("  <none>\n")
	}
	describeContainers(&b, o, now)
	b.WriteString("Status:\n")
	field(1, "Goal", printer.Dash(st.GetGoal()))
	field(1, "Phase", printer.Dash(st.GetPhase()))
	field(1, "Message", printer.Dash(st.GetMessage()))
	field(1, "Observed gen", fmt.Sprintf("%d of %d", st.GetObservedGeneration(), m.GetGeneration()))
	if t := st.GetNextRunTime(); t != nil {
		field(1, "Next run", t.AsTime().UTC().Format(time.RFC3339))
	}
	b.WriteString("  Conditions:\n")
	if len(st.GetConditions()) == 0 {
		b.WriteString("    <none>\n")
	} else {
		t := &printer.Table{Columns: []string{"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"}}
		for _, c := range st.GetConditions() {
			since := "-"
			if lt := c.GetLastTransitionTime(); lt != nil {
				since = printer.Age(now, lt.AsTime())
			}
			t.Rows = append(t.Rows, []string{c.GetType(), c.GetStatus(), printer.Dash(c.GetReason()), since, printer.Dash(c.GetMessage())})
		}
		indent(&b, t, "    ")
	}
	b.WriteString("DependsOn:\n")
	if len(d.Dependencies) == 0 {
		b.WriteString("  <none>\n")
	} else {
		t := &printer.Table{Columns: []string{"OBJECT", "READY", "PHASE"}}
		for _, dep := range d.Dependencies {
			t.Rows = append(t.Rows, []string{keyString(dep.Key), dep.Ready, printer.Dash(dep.Phase)})
		}
		indent(&b, t, "  ")
	}
	b.WriteString("Dependents:\n")
	if len(d.Dependents) == 0 {
		b.WriteString("  <none>\n")
	}
	for _, k := range d.Dependents {
		b.WriteString("  " + keyString(k) + "\n")
	}
	b.WriteString("Events:\n")
	evs := make([]*schemas.Event, 0, len(d.Events))
	for _, raw := range d.Events {
		ev, err := api.DecodeEvent(raw)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		b.WriteString("  <none>\n")
	} else {
		before, after := replay(evs)
		t := &printer.Table{Columns: []string{"SEQ", "AGE", "TYPE", "ACTOR", "DETAIL"}}
		for i, ev := range evs {
			detail := changeDetail(ev, before[i], after[i])
			if i == 0 && ev.GetType() != schemas.EventType_EVENT_TYPE_APPLIED {
				detail = "-" // the state before it is not in view
			}
			t.Rows = append(t.Rows, []string{fmt.Sprint(ev.GetSequence()), printer.Age(now, ev.GetTime().AsTime()), eventType(ev.GetType()), ev.GetActor(), printer.Dash(detail)})
		}
		indent(&b, t, "  ")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func indent(b *strings.Builder, t *printer.Table, prefix string) {
	var tb strings.Builder
	_ = t.Write(&tb, false)
	for _, line := range strings.Split(strings.TrimRight(tb.String(), "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
}
