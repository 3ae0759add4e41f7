package main

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
)

func newSubscribe(g *globals) *cobra.Command {
	var opts api.SubscribeOptions
	var kinds []string
	var namespaces []string
	follow := true
	cmd := &cobra.Command{
		Use:   "subscribe",
		Short: "Print every change as a CloudEvent, one JSON object a line",
		Long: `Print the changes of the log as CloudEvents 1.0 in structured JSON, one a
line: the same events a Subscription's sink receives, each carrying the
event (sequence, type, actor, cause) and the object right after it, with
Secret values masked. Start after a log sequence, at a time, or now (the
default); then follow new changes until Ctrl-C (or stop at the end of the
log with --follow=false). A broken stream is opened again after the last
sequence printed, so nothing is missed or printed twice.`,
		Example: `  jetplane subscribe --from 0 -k ConfigMap          # every ConfigMap change since the log began, then follow
  jetplane subscribe -k Deployment -n shop --types Applied,DeleteRequested
  jetplane subscribe --from 2026-11-27T09:00:00Z -l app=web --follow=false | jq .data.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Kinds, opts.Namespaces, opts.Follow = kinds, namespaces, follow
			w := bufio.NewWriter(os.Stdout)
			defer w.Flush()
			c := g.client()
			c.WatchRetry = func(err error, wait time.Duration) {
				fmt.Fprintf(os.Stderr, "subscribe: %v; trying again in %s\n", err, wait)
			}
			err := c.Subscribe(cmd.Context(), opts, func(e api.SubscribeEvent) error {
				if _, err := w.Write(append(e.Raw, '\n')); err != nil {
					return err
				}
				return w.Flush()
			})
			if err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("subscribe: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.From, "from", "", "start after this log sequence (0: the first event), at an RFC 3339 time, or now (default)")
	f.StringSliceVarP(&kinds, "kind", "k", nil, "only these kinds (as get takes them: cm, deploy, Widget.example.com); repeat or comma-separate")
	f.StringSliceVarP(&namespaces, "namespace", "n", nil, "only these namespaces")
	f.StringVarP(&opts.Selector, "selector", "l", "", "only objects whose labels match (app=web,tier!=db)")
	f.StringSliceVar(&opts.Types, "types", nil, "only these event types: Applied, DeleteRequested, Observed, StatusChanged, Bound, Finalized")
	f.BoolVar(&follow, "follow", true, "keep printing new changes; --follow=false stops at the end of the log")
	return cmd
}
