package main

import (
	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/printer"
)

func newWatch(g *globals) *cobra.Command {
	var lf listFlags
	var output string
	var noHeaders bool
	var from uint64
	cmd := &cobra.Command{
		Use:   "watch [KIND]",
		Short: "Stream changes as they happen",
		Long: `Print every change of matching objects: first the current objects (unless
--resource-version is given), then each change as it happens, in columns
that line up. Stops on Ctrl-C. When the server cannot be reached, watch
says so on stderr and keeps trying every second.`,
		Example: `  jetplane watch cm -n default
  jetplane watch deploy --field-selector status.phase!=Ready
  jetplane watch --resource-version 1200 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "table", "wide", "json"); err != nil {
				return err
			}
			if err := lf.check(); err != nil {
				return err
			}
			opts := printer.Options{Format: output, NoHeaders: noHeaders}
			if output != "json" {
				opts.Reconciler = reconcilerLookup(cmd.Context(), g.client())
			}
			return watchRows(cmd.Context(), cmd, g, lf.query(firstArg(args)), from, opts, true, nil)
		},
	}
	lf.add(cmd.Flags())
	cmd.Flags().Uint64Var(&from, "resource-version", 0, "resume after this resourceVersion instead of listing first")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, wide or json (one change per line)")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the header row")
	return cmd
}
