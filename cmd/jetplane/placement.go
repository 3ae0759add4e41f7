package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/scheduler/wasm"
	"github.com/jetplane/jetplane/schemas"
)

// placementFlags are placement's flags; explain takes them too, for the
// old form 'explain Pod/NAMESPACE/NAME'.
type placementFlags struct {
	ns, config string
	replay     bool
}

func (f *placementFlags) add(fs *pflag.FlagSet) {
	fs.StringVarP(&f.ns, "namespace", "n", "", "namespace, when the reference is Pod/NAME")
	fs.BoolVar(&f.replay, "replay", false, "re-run the decision on the state it saw")
	fs.StringVar(&f.config, "config", "", "scheduler config (YAML) whose profiles the replay uses")
}

func newPlacement(g *globals) *cobra.Command {
	var f placementFlags
	cmd := &cobra.Command{
		Use:   "placement Pod/NAMESPACE/NAME",
		Short: "Show why the scheduler put a pod on its node, and re-run that decision",
		Long: `Show the scheduling decision recorded in a pod's Bound event: the node, how
many nodes were looked at and passed, each filter's rejections by reason, the
best scores per plugin, the profile and the plugin versions.

With --replay, the cycle runs again on the state as of the decision's log
sequence (plus the pods it counted as assumed) with the plugins of --config
(default: the default profile), and says whether it reaches the same node, or
what differs and why (a changed plugin is named first).

This was 'jetplane explain Pod/NAMESPACE/NAME', which still works; 'jetplane
explain KIND' now documents a kind's fields, as kubectl explain does.`,
		Example: `  jetplane placement Pod/default/web-0
  jetplane placement Pod/default/web-0 --replay
  jetplane placement Pod/default/web-0 --replay --config scheduler.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlacement(cmd, g, f, args[0])
		},
	}
	f.add(cmd.Flags())
	return cmd
}

func runPlacement(cmd *cobra.Command, g *globals, f placementFlags, ref string) error {
	k, err := parseRef(ref, f.ns)
	if err != nil {
		return err
	}
	if k.Kind != "Pod" {
		return fmt.Errorf("%s: placement takes a Pod", ref)
	}
	var profiles map[string]*scheduler.Profile
	if f.replay {
		cfg := scheduler.DefaultConfig()
		if f.config != "" {
			if cfg, err = scheduler.LoadConfig(f.config); err != nil {
				return err
			}
		}
		// Plugins named by image come from the store through the API.
		if profiles, err = cfg.Build(wasm.RegistryWithImages(api.ImageSource{Client: g.client()})); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		defer closeProfiles(profiles)
	}
	return placement(cmd.Context(), cmd.OutOrStdout(), g.client(), k, profiles)
}

func closeProfiles(ps map[string]*scheduler.Profile) {
	for _, p := range ps {
		for _, pl := range p.Filter {
			if c, ok := pl.(wasm.Closer); ok {
				c.Close()
			}
		}
		for _, pl := range p.Score {
			if c, ok := pl.Plugin.(wasm.Closer); ok {
				c.Close()
			}
		}
	}
}

// placement prints the last Bound decision of pod k; with profiles, it
// replays it too.
func placement(ctx context.Context, w io.Writer, c *api.Client, k api.Key, profiles map[string]*scheduler.Profile) error {
	_, evs, err := history(ctx, c, k)
	if err != nil {
		return err
	}
	bound, rec, err := scheduler.LastBound(evs)
	if errors.Is(err, scheduler.ErrNotBound) {
		return fmt.Errorf("%s %w", keyString(k), err)
	}
	if err != nil {
		return err
	}
	printDecision(w, bound, rec)
	if profiles == nil {
		return nil
	}
	list := func(ctx context.Context, at uint64, kind string) ([]*schemas.Object, error) {
		resp, err := c.StateAt(ctx, strconv.FormatUint(at, 10), api.Query{Kind: kind})
		if err != nil {
			return nil, err
		}
		out := make([]*schemas.Object, 0, len(resp.Items))
		for _, raw := range resp.Items {
			o, err := api.DecodeObject(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		return out, nil
	}
	d, err := scheduler.ReplayBound(ctx, list, k.Namespace, k.Name, bound, rec, profiles)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	diff := scheduler.Differences(rec, d)
	if len(diff) == 0 {
		fmt.Fprintf(w, "\nReplay: same decision: node %s, on the state at sequence %d.\n", d.Node, rec.SnapshotSequence)
		return nil
	}
	fmt.Fprintf(w, "\nReplay on the state at sequence %d differs:\n", rec.SnapshotSequence)
	for _, s := range diff {
		fmt.Fprintf(w, "  - %s\n", s)
	}
	return nil
}

func printDecision(w io.Writer, bound *schemas.Event, rec *scheduler.RecordedDecision) {
	fmt.Fprintf(w, "Pod:        %s\n", rec.Pod)
	fmt.Fprintf(w, "Node:       %s\n", rec.Node)
	fmt.Fprintf(w, "Bound:      sequence %d at %s by %s\n", bound.Sequence, bound.GetTime().AsTime().Format("2006-01-02T15:04:05Z07:00"), bound.Actor)
	fmt.Fprintf(w, "Profile:    %s\n", rec.Profile)
	fmt.Fprintf(w, "Snapshot:   sequence %d, %d assumed pod(s)\n", rec.SnapshotSequence, len(rec.Assumed))
	fmt.Fprintf(w, "Nodes:      %d evaluated of %d, %d feasible\n", rec.Evaluated, rec.NumNodes, rec.Feasible)
	if len(rec.Rejections) > 0 {
		fmt.Fprintf(w, "Rejected:   %s\n", scheduler.RejectionSummary(rec.Rejections))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSCORE PLUGIN\tWEIGHT\tBEST NODES")
	for _, s := range rec.Scores {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Plugin, s.Weight, scoresString(s.Top))
	}
	fmt.Fprintf(tw, "total\t\t%s\n", scoresString(rec.Totals))
	tw.Flush()
	names := make([]string, 0, len(rec.Versions))
	for n := range rec.Versions {
		names = append(names, n)
	}
	sort.Strings(names)
	var vs []string
	for _, n := range names {
		vs = append(vs, n+"="+rec.Versions[n])
	}
	fmt.Fprintf(w, "\nPlugins:    %s\n", strings.Join(vs, ", "))
}

func scoresString(ns []scheduler.NodeScore) string {
	parts := make([]string, len(ns))
	for i, s := range ns {
		parts[i] = fmt.Sprintf("%s=%d", s.Name, s.Score)
	}
	return strings.Join(parts, " ")
}
