package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
)

func newClusters(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "Show the Kubernetes clusters jetplane watches and how each is doing",
		Long: `Show each Kubernetes cluster that 'jetplane serve --clusters' watches: its
state (connecting until it first synced, then synced, or error while listing,
watching or appending fails), the resources watched, the objects held, when
its last event was appended, and its error. The server answers this even
while it is not ready, which is how to find out why.

Objects a cluster holds appear under namespace CLUSTER/NAMESPACE:
'jetplane get ConfigMap -n prod/shop' lists the ConfigMaps seen in namespace
shop of cluster prod.`,
		Example: `  jetplane clusters
  jetplane clusters -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "", "table", "json", "yaml"); err != nil {
				return err
			}
			resp, err := g.client().Clusters(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				docs := make([]json.RawMessage, len(resp.Clusters))
				for i, c := range resp.Clusters {
					if docs[i], err = json.Marshal(c); err != nil {
						return err
					}
				}
				return writeDocs(cmd.OutOrStdout(), output, docs, output == "json")
			}
			if len(resp.Clusters) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No clusters: start the server with --clusters FILE to watch Kubernetes clusters.")
				return nil
			}
			return clustersTable(cmd.OutOrStdout(), resp.Clusters, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, json or yaml")
	return cmd
}

func clustersTable(w io.Writer, clusters []api.Cluster, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tRESOURCES\tOBJECTS\tLAST EVENT\tERROR")
	for _, c := range clusters {
		res := make([]string, len(c.Resources))
		for i, r := range c.Resources {
			res[i] = r.Resource
		}
		last := "-"
		if c.LastEventTime != nil {
			last = printer.Age(now, *c.LastEventTime) + " ago"
		}
		// A synced cluster's last error is history; the JSON keeps it.
		errMsg := "-"
		if c.State != "synced" && c.LastError != "" {
			errMsg = c.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, c.State, strings.Join(res, ", "), c.Objects, last, errMsg)
	}
	return tw.Flush()
}
