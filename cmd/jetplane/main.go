// Command jetplane is the one jetplane binary: `jetplane serve` runs the
// control plane, every other command is a client of its HTTP API.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(execute(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func printError(w io.Writer, err error) {
	var apiErr *api.APIError
	if errors.As(err, &apiErr) && len(apiErr.Details) > 1 {
		fmt.Fprintf(w, "error: %d problems; nothing was applied:\n", len(apiErr.Details))
		for _, d := range apiErr.Details {
			fmt.Fprintln(w, "  -", describeDetail(d))
		}
		return
	}
	fmt.Fprintln(w, "error:", cliWording(err.Error()))
}

// cliWording turns the API's advice about query parameters into the flags
// of this command line: the server speaks to every HTTP client, the CLI's
// user types -n.
func cliWording(msg string) string {
	return strings.ReplaceAll(msg, "name one with namespace=", "name one with -n NAMESPACE")
}

func describeDetail(d api.ErrorDetail) string {
	var parts []string
	if d.Source != "" {
		parts = append(parts, d.Source)
	}
	if d.Document > 0 {
		parts = append(parts, fmt.Sprintf("document %d", d.Document))
	}
	where := strings.Join(parts, ", ")
	if d.Field != "" {
		if where != "" {
			where += ": "
		}
		where += d.Field
	}
	if where == "" {
		return d.Reason
	}
	return where + ": " + d.Reason
}

// globals are the flags every client command shares.
type globals struct {
	server      string
	token       string
	showSecrets bool // security.go
	purge       bool // security.go; delete only
	caFile      string
}

func (g *globals) client() *api.Client {
	token := g.token
	if token == "" {
		// Read here, never as the flag's default: help prints defaults.
		token = os.Getenv("JETPLANE_TOKEN")
	}
	return &api.Client{BaseURL: g.server, Token: token, ShowSecrets: g.showSecrets, PurgeSecretData: g.purge, HTTP: g.httpClient()}
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "jetplane",
		Short: "jetplane is an event-sourced control plane on NATS JetStream",
		Long: `jetplane records every change — manifests applied, status written — as an
immutable event in a JetStream log, and folds the log into current state that
you can get, list, watch, audit by history, and read as of any past point.

Start the control plane with 'jetplane serve'; the other commands talk to it.`,
		Example: `  jetplane serve --data ./data &
  jetplane apply -f deploy/examples/
  jetplane get
  jetplane history Deployment.apps/shop/web`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.server, "server", envOr("JETPLANE_SERVER", "http://127.0.0.1:7070"), "API server URL (env JETPLANE_SERVER)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "bearer token for the API (env JETPLANE_TOKEN)")
	root.AddCommand(newServe(), newApply(g), newGet(g), newDelete(g), newWatch(g), newSubscribe(g), newDecode(), newHistory(g), newState(g), newClusters(g), newExplain(g), newPlacement(g))
	root.AddCommand(newDescribe(g), newDiff(g), newAPIResources(g), newVersion(g), newKubeconfig(g))
	root.AddCommand(newNode(), newImage(g), newLogs(g))
	root.AddCommand(newCreds(), newKeys())
	secretFlags(root, g)
	root.AddCommand(newChart(g), newRollback(g), newHelm(g), newTemplate(), newBackup(g), newRestore(), newVerify(g))
	root.AddCommand(newScale(g), newRollout(g))
	root.AddCommand(newElsewhere()...)
	finishCommands(root, g)
	return root
}
