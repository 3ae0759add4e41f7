package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
	"github.com/jetplane/jetplane/internal/app"
)

func newVersion(g *globals) *cobra.Command {
	var output string
	var client bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the client's and the server's versions and the log's settings",
		Long: `Show this binary's version and, from the server, its version and how its log
is kept: partitions, replicas, durability, and how long idempotency keys
are remembered. --client skips the server.`,
		Example: `  jetplane version
  jetplane version --client
  jetplane version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "", "json", "yaml"); err != nil {
				return err
			}
			out := struct {
				Client string       `json:"clientVersion"`
				Server *api.Version `json:"server,omitempty"`
			}{Client: app.BuildVersion()}
			var serverErr error
			if !client {
				out.Server, serverErr = g.client().Version(cmd.Context())
				if serverErr != nil {
					out.Server = nil
				}
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json", "yaml":
				b, err := json.Marshal(out)
				if err != nil {
					return err
				}
				if output == "json" {
					if err := writeDocs(w, "json", []json.RawMessage{b}, false); err != nil {
						return err
					}
				} else if err := printer.WriteYAML(w, b); err != nil {
					return err
				}
			default:
				fmt.Fprintf(w, "Client Version: %s\n", out.Client)
				if s := out.Server; s != nil {
					fmt.Fprintf(w, "Server Version: %s\n", s.Version)
					fmt.Fprintf(w, "Log: %d partitions, %d %s, durability: %s\n", s.Partitions, s.Replicas, plural(s.Replicas, "replica"), s.Durability)
					fmt.Fprintf(w, "Idempotency keys kept: %s\n", s.DuplicateWindow)
				}
			}
			return serverErr
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: json or yaml")
	cmd.Flags().BoolVar(&client, "client", false, "the client's version only; do not ask the server")
	return cmd
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func newAPIResources(g *globals) *cobra.Command {
	var output string
	var noHeaders bool
	cmd := &cobra.Command{
		Use:     "api-resources",
		Aliases: []string{"kinds"},
		Short:   "List the kinds: names, short names, objects and what reconciles them",
		Long: `List every kind jetplane knows by name — its built-in kinds and every kind
objects in the log have — with the plural and short names commands accept,
whether it is namespaced, how many objects of it exist, and what reconciles
it ("-": stored only; no status is written).`,
		Example: `  jetplane api-resources
  jetplane api-resources -o name
  jetplane kinds --no-headers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "table", "wide", "name", "json"); err != nil {
				return err
			}
			resp, err := g.client().Kinds(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				b, err := json.Marshal(resp)
				if err != nil {
					return err
				}
				return writeDocs(w, "json", []json.RawMessage{b}, false)
			case "name":
				for _, k := range resp.Kinds {
					fmt.Fprintln(w, k.Name)
				}
				return nil
			}
			t := &printer.Table{Columns: []string{"NAME", "SHORTNAMES", "GROUP", "NAMESPACED", "KIND", "OBJECTS", "RECONCILER"}}
			for _, k := range slices.Clone(resp.Kinds) {
				t.Rows = append(t.Rows, []string{k.Plural, strings.Join(k.ShortNames, ","), printer.Dash(k.Group), fmt.Sprint(k.Namespaced), k.Kind, fmt.Sprint(k.Objects), printer.Dash(k.Reconciler)})
			}
			return t.Write(w, noHeaders)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, name or json")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the header row")
	return cmd
}
