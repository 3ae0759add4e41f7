package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
)

func newDiff(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|-",
		Short: "Show what an apply would change, as a unified diff against current state",
		Long: `Compare manifests with current state: the server checks them as an apply
would (validation, dependsOn cycles, objects being deleted) and answers what
it would store; diff prints that against what is stored now, as a unified
diff of metadata and spec. Nothing is written.

Exit code, as kubectl diff: 0 when nothing would change, 1 when something
would, 2 or more when the diff itself failed.`,
		Example: `  jetplane diff -f deploy/examples/
  jetplane diff -f app.yaml && echo "up to date"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usage(fmt.Errorf("-f: give a file, a directory or - for stdin"))
			}
			source, body, err := readManifests(cmd, files)
			if err != nil {
				return codeError{code: exitUsage, err: err}
			}
			resp, err := g.client().ApplyDryRun(cmd.Context(), source, body)
			if err != nil {
				if exitCode(err) < exitUsage {
					return codeError{code: exitUsage, err: err}
				}
				return err
			}
			printWarnings(cmd.ErrOrStderr(), resp.Warnings)
			changed := 0
			w := cmd.OutOrStdout()
			for _, r := range resp.Results {
				a, err := diffView(r.Previous)
				if err != nil {
					return err
				}
				b, err := diffView(r.Object)
				if err != nil {
					return err
				}
				name := keyString(r.Key)
				if d := printer.Unified("live/"+name, "applied/"+name, a, b); d != "" {
					changed++
					fmt.Fprint(w, d)
				}
			}
			if changed > 0 {
				return quietExit{code: exitError}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory of *.yaml/*.yml/*.json, or - for stdin (repeatable)")
	return cmd
}

// diffView is an object as diff compares it: apiVersion, kind, the
// metadata people write, and spec; empty for none.
func diffView(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	o, err := api.DecodeObject(raw)
	if err != nil {
		return "", err
	}
	view := map[string]any{"apiVersion": o.GetApiVersion(), "kind": o.GetKind()}
	m := map[string]any{"name": o.GetMetadata().GetName()}
	if ns := o.GetMetadata().GetNamespace(); ns != "" {
		m["namespace"] = ns
	}
	for k, v := range userMetadata(o.GetMetadata()) {
		m[k] = v
	}
	view["metadata"] = m
	if s := specOf(o); s != nil {
		view["spec"] = s
	}
	b, err := json.Marshal(view)
	if err != nil {
		return "", err
	}
	y, err := printer.ToYAML(b)
	return strings.TrimPrefix(string(y), "---\n"), err
}
