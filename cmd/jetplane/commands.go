package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

func newApply(g *globals) *cobra.Command {
	var files []string
	var idem, output string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Record manifests as desired state",
		Long: `Apply one or more manifests (YAML or JSON, several documents per file) as
desired state. Everything is checked before anything is written: one bad
document rejects the whole apply and nothing reaches the log.`,
		Example: `  jetplane apply -f deploy/examples/
  jetplane apply -f app.yaml --idempotency-key release-42
  jetplane apply -f app.yaml --dry-run          # check against current state, write nothing
  cat app.yaml | jetplane apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usage(fmt.Errorf("-f: give a file, a directory or - for stdin"))
			}
			if err := outputFormat(output, "", "name", "json", "yaml"); err != nil {
				return err
			}
			source, body, err := readManifests(cmd, files)
			if err != nil {
				return err
			}
			if dryRun {
				if idem != "" {
					return usage(fmt.Errorf("--dry-run writes nothing; it takes no --idempotency-key"))
				}
				resp, err := g.client().ApplyDryRun(cmd.Context(), source, body)
				if err != nil {
					return err
				}
				for i := range resp.Results {
					resp.Results[i].Action += " (dry run)"
				}
				printWarnings(cmd.ErrOrStderr(), resp.Warnings)
				return printResults(cmd.OutOrStdout(), output, resp)
			}
			resp, err := g.client().Apply(cmd.Context(), source, body, idem)
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), resp.Warnings)
			return printResults(cmd.OutOrStdout(), output, resp)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory of *.yaml/*.yml/*.json, or - for stdin (repeatable)")
	cmd.Flags().StringVar(&idem, "idempotency-key", "", "key that makes a retried apply store nothing twice; the same key with another body is refused (kept for the server's duplicate window, see 'jetplane version')")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate and check against current state (conflicts, dependsOn cycles, objects being deleted); write nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: name (default), json or yaml")
	return cmd
}

// readManifests decodes files locally (errors name the file; nothing is
// sent unless every document is valid) and returns them as one body.
func readManifests(cmd *cobra.Command, files []string) (string, []byte, error) {
	var body []byte
	var sources []string
	for _, f := range files {
		objs, err := manifest.DecodePath(f, cmd.InOrStdin())
		if err != nil {
			return "", nil, err
		}
		for _, o := range objs {
			doc, err := protojson.Marshal(o)
			if err != nil {
				return "", nil, err
			}
			body = append(body, "---\n"...)
			body = append(body, doc...)
			body = append(body, '\n')
		}
		sources = append(sources, f)
	}
	return strings.Join(sources, ","), body, nil
}

// printWarnings prints the server's warnings as kubectl does.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintln(w, "Warning:", s)
	}
}

func printResults(w io.Writer, output string, resp *api.ApplyResponse) error {
	if output == "json" || output == "yaml" {
		var docs []json.RawMessage
		for _, r := range resp.Results {
			if r.Object != nil {
				docs = append(docs, r.Object)
			}
		}
		return writeDocs(w, output, docs, false)
	}
	for _, r := range resp.Results {
		fmt.Fprintf(w, "%s %s\n", keyString(r.Key), r.Action)
	}
	return nil
}

func keyString(k api.Key) string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// parseRef reads KIND/NAME or KIND/NAMESPACE/NAME; -n fills a missing
// namespace. The namespace of an object observed in a Kubernetes cluster
// holds a slash (CLUSTER/NAMESPACE, CLUSTER/ when cluster-scoped), so
// everything between the first and the last slash is the namespace.
func parseRef(ref, namespace string) (api.Key, error) {
	parts := strings.Split(ref, "/")
	n := len(parts)
	switch {
	case n == 2 && parts[0] != "" && parts[1] != "":
		return api.Key{Kind: parts[0], Namespace: namespace, Name: parts[1]}, nil
	case n >= 3 && parts[0] != "" && parts[n-1] != "":
		return api.Key{Kind: parts[0], Namespace: strings.Join(parts[1:n-1], "/"), Name: parts[n-1]}, nil
	}
	return api.Key{}, usage(fmt.Errorf("%q: want KIND/NAMESPACE/NAME, or KIND/NAME for a cluster-scoped object (KIND/CLUSTER/NAMESPACE/NAME for one observed in a Kubernetes cluster)", ref))
}

func newState(g *globals) *cobra.Command {
	var at, ns, selector, output string
	cmd := &cobra.Command{
		Use:   "state --at TIME|SEQ [KIND]",
		Short: "Show the state as it was at a past time or log sequence",
		Long: `Rebuild and show the objects as they were right after log sequence SEQ, or at
TIME (RFC 3339, such as 2026-11-22T10:00:00Z, or a duration ago such as 15m).`,
		Example: `  jetplane state --at 120
  jetplane state --at 2026-11-22T10:00:00Z ConfigMap -n default
  jetplane state --at 1h -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at == "" {
				return usage(fmt.Errorf("--at: give a log sequence, an RFC 3339 time, or a duration ago such as 15m"))
			}
			if err := outputFormat(output, "", "table", "json", "yaml"); err != nil {
				return err
			}
			if d, err := time.ParseDuration(at); err == nil {
				at = time.Now().Add(-d).UTC().Format(time.RFC3339Nano)
			} else if !isSeqOrTime(at) {
				return usage(fmt.Errorf("--at %q: give a duration ago (10m, 2h30m, 36h), a log sequence (120) or an RFC 3339 time (2026-11-22T10:00:00Z)", at))
			}
			q := api.Query{Namespace: ns, LabelSelector: selector}
			if len(args) == 1 {
				q.Kind = args[0]
			}
			list, err := g.client().StateAt(cmd.Context(), at, q)
			if err != nil {
				return err
			}
			if output != "json" && output != "yaml" {
				fmt.Fprintf(cmd.ErrOrStderr(), "State at sequence %d:\n", list.ResourceVersion)
			}
			return printList(cmd, output, list.Items)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "log sequence, RFC 3339 time, or duration ago")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (empty: all)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, json or yaml")
	return cmd
}

// isSeqOrTime reports whether at is a log sequence or an RFC 3339 time,
// the forms the server takes besides the durations the CLI turns into one.
func isSeqOrTime(at string) bool {
	if _, err := strconv.ParseUint(at, 10, 64); err == nil {
		return true
	}
	_, err := time.Parse(time.RFC3339Nano, at)
	return err == nil
}

// history reads one key's events, raw and decoded.
func history(ctx context.Context, c *api.Client, k api.Key) ([]json.RawMessage, []*schemas.Event, error) {
	resp, err := c.History(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	evs := make([]*schemas.Event, len(resp.Events))
	for i, raw := range resp.Events {
		if evs[i], err = api.DecodeEvent(raw); err != nil {
			return nil, nil, fmt.Errorf("server sent a bad event: %w", err)
		}
	}
	return resp.Events, evs, nil
}

// observedKeyOf is the key under which the bridge records the Kubernetes
// object an Apply manages, from the Apply's latest spec in its history.
func observedKeyOf(evs []*schemas.Event) (api.Key, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		spec := evs[i].GetObject().GetSpec()
		if spec == nil {
			continue
		}
		m := spec.GetFields()["manifest"].GetStructValue()
		cluster := spec.GetFields()["cluster"].GetStringValue()
		if m == nil || cluster == "" {
			return api.Key{}, false
		}
		k := apply.ObservedKey(cluster, &unstructured.Unstructured{Object: m.AsMap()})
		return api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}, true
	}
	return api.Key{}, false
}

// mergeHistories interleaves two histories by log sequence.
func mergeHistories(ar []json.RawMessage, ae []*schemas.Event, br []json.RawMessage, be []*schemas.Event) ([]json.RawMessage, []*schemas.Event) {
	raws := make([]json.RawMessage, 0, len(ar)+len(br))
	evs := make([]*schemas.Event, 0, len(ae)+len(be))
	i, j := 0, 0
	for i < len(ae) || j < len(be) {
		if j == len(be) || (i < len(ae) && ae[i].GetSequence() < be[j].GetSequence()) {
			raws, evs = append(raws, ar[i]), append(evs, ae[i])
			i++
		} else {
			raws, evs = append(raws, br[j]), append(evs, be[j])
			j++
		}
	}
	return raws, evs
}
