package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/manifest"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
)

func newApply(g *globals) *cobra.Command {
	var files []string
	var idem, output string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Record manifests as desired state",
		Long: `Apply one or more manifests (YAML or JSON, several documents per file) as
desired state. Everything is checked before anything is written: one bad
document rejects the whole apply and nothing reaches the log.`,
		Example: `  jetplane apply -f deploy/examples/
  jetplane apply -f app.yaml --idempotency-key release-42
  cat app.yaml | jetplane apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f: give a file, a directory or - for stdin")
			}
			if err := outputFormat(output, "", "name", "json", "yaml"); err != nil {
				return err
			}
			var body []byte
			var sources []string
			for _, f := range files {
				// Decode locally first: errors name the file, and nothing is
				// sent unless every document is valid.
				objs, err := manifest.DecodePath(f, cmd.InOrStdin())
				if err != nil {
					return err
				}
				for _, o := range objs {
					doc, err := protojson.Marshal(o)
					if err != nil {
						return err
					}
					body = append(body, "---\n"...)
					body = append(body, doc...)
					body = append(body, '\n')
				}
				sources = append(sources, f)
			}
			resp, err := g.client().Apply(cmd.Context(), strings.Join(sources, ","), body, idem)
			if err != nil {
				return err
			}
			return printResults(cmd.OutOrStdout(), output, resp)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory of *.yaml/*.yml/*.json, or - for stdin (repeatable)")
	cmd.Flags().StringVar(&idem, "idempotency-key", "", "key that makes a retried apply store nothing twice")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: name (default), json or yaml")
	return cmd
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
	return api.Key{}, fmt.Errorf("%q: want KIND/NAMESPACE/NAME, or KIND/NAME for a cluster-scoped object (KIND/CLUSTER/NAMESPACE/NAME for one observed in a Kubernetes cluster)", ref)
}

func newGet(g *globals) *cobra.Command {
	var ns, selector, output string
	cmd := &cobra.Command{
		Use:   "get [KIND [NAME]]",
		Short: "Show current state: one object, or a list",
		Long: `Show objects from current state. KIND is the kind with its API group for
grouped kinds (Deployment.apps); a bare kind matches every group. With NAME,
show one object.`,
		Example: `  jetplane get
  jetplane get ConfigMap -n default
  jetplane get Deployment.apps web -n shop -o yaml
  jetplane get ConfigMap -l app=web,tier!=cache`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "", "table", "json", "yaml"); err != nil {
				return err
			}
			c := g.client()
			w := cmd.OutOrStdout()
			if len(args) == 2 {
				raw, err := c.Get(cmd.Context(), api.Key{Kind: args[0], Namespace: ns, Name: args[1]})
				if err != nil {
					return err
				}
				if output == "json" || output == "yaml" {
					return writeDocs(w, output, []json.RawMessage{raw}, false)
				}
				objs, err := decodeObjects([]json.RawMessage{raw})
				if err != nil {
					return err
				}
				return objectsTable(w, objs, time.Now())
			}
			q := api.Query{Namespace: ns, LabelSelector: selector}
			if len(args) == 1 {
				q.Kind = args[0]
			}
			list, err := c.List(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printList(cmd, output, list.Items)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (empty: all namespaces for lists, cluster scope for one object)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, such as app=web,tier in (front,back)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, json or yaml")
	return cmd
}

func newDelete(g *globals) *cobra.Command {
	var ns string
	var files []string
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME | KIND/NAME | KIND/NAMESPACE/NAME | -f FILE)",
		Short: "Request deletion of objects",
		Long: `Request deletion: the object's goal becomes deleted, and once it is finalized
it leaves current state. Its history stays in the log.`,
		Example: `  jetplane delete ConfigMap settings -n default
  jetplane delete ConfigMap/default/settings
  jetplane delete -f app.yaml`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys []api.Key
			switch {
			case len(files) > 0 && len(args) > 0:
				return fmt.Errorf("give either -f or KIND NAME, not both")
			case len(files) > 0:
				for _, f := range files {
					objs, err := manifest.DecodePath(f, cmd.InOrStdin())
					if err != nil {
						return err
					}
					for _, o := range objs {
						k := manifest.KeyOf(o)
						keys = append(keys, api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name})
					}
				}
			case len(args) == 2:
				keys = append(keys, api.Key{Kind: args[0], Namespace: ns, Name: args[1]})
			case len(args) == 1:
				k, err := parseRef(args[0], ns)
				if err != nil {
					return err
				}
				keys = append(keys, k)
			default:
				return fmt.Errorf("name what to delete: KIND NAME, KIND/NAMESPACE/NAME or -f FILE")
			}
			for _, k := range keys {
				resp, err := g.client().Delete(cmd.Context(), k)
				if err != nil {
					return err
				}
				if err := printResults(cmd.OutOrStdout(), "", resp); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace of the object")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "delete the objects of these manifests")
	return cmd
}

func newWatch(g *globals) *cobra.Command {
	var ns, selector, output string
	var from uint64
	cmd := &cobra.Command{
		Use:   "watch [KIND]",
		Short: "Stream changes as they happen",
		Long: `Print every change of matching objects: first the current objects (unless
--resource-version is given), then each change as it happens. Stops on Ctrl-C.`,
		Example: `  jetplane watch ConfigMap -n default
  jetplane watch --resource-version 1200 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "", "table", "json"); err != nil {
				return err
			}
			q := api.Query{Namespace: ns, LabelSelector: selector}
			if len(args) == 1 {
				q.Kind = args[0]
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			if output != "json" {
				fmt.Fprintln(tw, "TYPE\tRESOURCEVERSION\tKIND\tNAMESPACE\tNAME\tGOAL\tPHASE")
				tw.Flush()
			}
			err := g.client().Watch(cmd.Context(), q, from, func(ev api.WatchEvent) error {
				if output == "json" {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(w, "%s\n", b)
					return err
				}
				o, err := api.DecodeObject(ev.Object)
				if err != nil {
					return err
				}
				// The object's own version: the first objects of a watch
				// carry no event sequence of their own.
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", ev.Type, o.GetMetadata().GetResourceVersion(), ev.Key.Kind, dash(ev.Key.Namespace), ev.Key.Name,
					dash(o.GetStatus().GetGoal()), dash(o.GetStatus().GetPhase()))
				return tw.Flush()
			})
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (empty: all)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector")
	cmd.Flags().Uint64Var(&from, "resource-version", 0, "resume after this resourceVersion instead of listing first")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table or json (one change per line)")
	return cmd
}

func newHistory(g *globals) *cobra.Command {
	var output, ns string
	cmd := &cobra.Command{
		Use:   "history KIND/NAMESPACE/NAME",
		Short: "Show every event of one object: who changed what, when, and why",
		Long: `Show the full history of one object from the log, oldest first: each event's
sequence, time, type, actor and cause. History outlives deletion.

For an Apply, the bridge's observations of the Kubernetes object it manages
(Observed, and Finalized when the object left the cluster) are shown beside
the Apply's own events, with an OBJECT column saying which is which.`,
		Example: `  jetplane history ConfigMap/default/settings
  jetplane history ConfigMap/prod/shop/web      # observed in namespace shop of cluster prod
  jetplane history Namespace/shop
  jetplane history Deployment.apps/shop/web -o yaml
  jetplane history Apply/apps/web                # with the Deployment it manages`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "", "table", "json", "yaml"); err != nil {
				return err
			}
			k, err := parseRef(args[0], ns)
			if err != nil {
				return err
			}
			raws, evs, err := history(cmd.Context(), g.client(), k)
			if err != nil {
				return err
			}
			merged := false
			if k.Kind == apply.Kind {
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
			if output == "json" || output == "yaml" {
				return writeDocs(cmd.OutOrStdout(), output, raws, output == "json")
			}
			return historyTable(cmd.OutOrStdout(), evs, merged)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table, json or yaml")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace, when the reference is KIND/NAME")
	return cmd
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
				return fmt.Errorf("--at: give a log sequence, an RFC 3339 time, or a duration ago such as 15m")
			}
			if err := outputFormat(output, "", "table", "json", "yaml"); err != nil {
				return err
			}
			if d, err := time.ParseDuration(at); err == nil {
				at = time.Now().Add(-d).UTC().Format(time.RFC3339Nano)
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
