package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
)

// listFlags are the flags of commands that select objects as kubectl does.
type listFlags struct {
	namespace, selector, fields string
	allNamespaces               bool
}

func (f *listFlags) add(fs *pflag.FlagSet) {
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace (without it, lists cover every namespace and one object is looked up by name)")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "every namespace (the default for lists; accepted as kubectl takes it)")
	fs.StringVarP(&f.selector, "selector", "l", "", "label selector, such as app=web,tier in (front,back)")
	fs.StringVar(&f.fields, "field-selector", "", "field selector on metadata.name, metadata.namespace, status.phase (=, ==, !=), such as status.phase=Running")
}

func (f *listFlags) check() error {
	if f.allNamespaces && f.namespace != "" {
		return usage(errors.New("-A and -n: give one"))
	}
	return nil
}

func (f *listFlags) query(kind string) api.Query {
	return api.Query{Kind: kind, Namespace: f.namespace, LabelSelector: f.selector, FieldSelector: f.fields}
}

// outFlags are the output flags of get.
type outFlags struct {
	output, sortBy        string
	noHeaders, showLabels bool
}

func (o *outFlags) add(fs *pflag.FlagSet) {
	fs.StringVarP(&o.output, "output", "o", "table", "output: "+printer.Formats)
	fs.StringVar(&o.sortBy, "sort-by", "", "sort lists by a JSONPath, such as .metadata.name or {.metadata.resourceVersion}")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "leave out the header row of tables")
	fs.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column")
}

func (o *outFlags) options() printer.Options {
	return printer.Options{Format: o.output, NoHeaders: o.noHeaders, ShowLabels: o.showLabels, SortBy: o.sortBy}
}

func (o *outFlags) table() bool { return o.output == "table" || o.output == "" || o.output == "wide" }

func newGet(g *globals) *cobra.Command {
	var lf listFlags
	var of outFlags
	var watch bool
	cmd := &cobra.Command{
		Use:   "get [KIND[,KIND...] [NAME...] | KIND/NAME... | KIND/NAMESPACE/NAME...]",
		Short: "Show current state: one object, or a list",
		Long: `Show objects from current state, as kubectl get does.

KIND is case-insensitive and may be singular, plural or a short name
(deploy, cm, po, ns...); a kind without its group (Deployment) names the one
group it exists in, and Kind.group (Deployment.apps) names one explicitly.
'jetplane api-resources' lists the kinds. An unknown kind is an error with
suggestions.

Without a KIND, or with 'all' (which, unlike kubectl's, means every kind),
get lists objects of every kind. Without -n, lists cover every namespace,
and NAME is looked up in every namespace (an error names them when it
exists in more than one). jetplane has no Event objects: 'get events' points
at 'jetplane history', which shows every event of an object.`,
		Example: `  jetplane get
  jetplane get all -n shop
  jetplane get deploy -n shop
  jetplane get deployment web -n shop -o yaml
  jetplane get Deployment/shop/web
  jetplane get cm -l app=web --show-labels
  jetplane get cm,deploy -o wide
  jetplane get deploy --field-selector metadata.name=web -o name
  jetplane get deploy -o jsonpath='{.items[*].metadata.name}'
  jetplane get deploy -o custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas --sort-by .spec.replicas
  jetplane get cm -n shop -w`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && strings.EqualFold(args[0], "all") {
				args = nil // kubectl's "all": here, every kind
			}
			opts := of.options()
			if err := lf.check(); err != nil {
				return err
			}
			if err := opts.Check(); err != nil {
				return usage(err)
			}
			c := g.client()
			ctx := cmd.Context()
			if of.table() {
				opts.Reconciler, opts.Columns = kindLookup(ctx, c)
			}
			var items []printer.Item
			var listRV uint64
			var missing []string
			single := false
			switch {
			case len(args) > 0 && strings.Contains(args[0], "/"):
				single = len(args) == 1
				for _, a := range args {
					k, err := parseRef(a, lf.namespace)
					if err != nil {
						return err
					}
					it, err := getOne(ctx, c, k, lf.namespace != "")
					if isNotFound(err) {
						missing = append(missing, err.Error())
						continue
					}
					if err != nil {
						return err
					}
					items = append(items, it)
				}
			case len(args) > 1:
				single = len(args) == 2
				for _, name := range args[1:] {
					it, err := getOne(ctx, c, api.Key{Kind: args[0], Namespace: lf.namespace, Name: name}, lf.namespace != "")
					if isNotFound(err) {
						missing = append(missing, err.Error())
						continue
					}
					if err != nil {
						return err
					}
					items = append(items, it)
				}
			default:
				kinds := []string{""}
				if len(args) == 1 && !slices.ContainsFunc(strings.Split(args[0], ","), func(k string) bool { return strings.EqualFold(k, "all") }) {
					kinds = strings.Split(args[0], ",")
				}
				for _, kind := range kinds {
					list, err := c.List(ctx, lf.query(kind))
					if err != nil {
						return err
					}
					its, err := printer.Decode(list.Items, api.DecodeObject)
					if err != nil {
						return err
					}
					items = append(items, its...)
					listRV = max(listRV, list.ResourceVersion)
				}
			}
			w := cmd.OutOrStdout()
			if watch && of.table() && len(missing) == 0 {
				// One aligned table for the list and the changes after it.
				stream := newRowStream(w, opts, false)
				for _, it := range items {
					stream.Add(printer.ObjectRow(it.Object, opts))
				}
				if err := stream.Flush(); err != nil {
					return err
				}
				return watchRows(ctx, cmd, g, lf.query(firstArg(args)), listRV, opts, false, stream)
			}
			if len(items) == 0 && len(missing) == 0 && of.table() {
				fmt.Fprintln(cmd.ErrOrStderr(), "No objects found.")
				if len(args) == 1 && isEventsKind(args[0]) {
					fmt.Fprintln(cmd.ErrOrStderr(), eventsHint)
				}
			} else if len(items) > 0 || !of.table() {
				if err := printer.Print(w, items, single && len(missing) == 0, opts); err != nil {
					return err
				}
				if of.table() && !of.noHeaders {
					phaseHint(cmd.ErrOrStderr(), items, opts.Reconciler)
				}
			}
			if len(missing) > 0 {
				return codeError{code: exitNotFound, err: errors.New(strings.Join(missing, "; "))}
			}
			if !watch {
				return nil
			}
			return watchRows(ctx, cmd, g, lf.query(firstArg(args)), listRV, opts, false, nil)
		},
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if watch && (len(args) > 1 || strings.Contains(firstArg(args), "/") || strings.Contains(firstArg(args), ",")) {
				return usage(errors.New("-w watches a kind (or everything), not named objects or several kinds"))
			}
			if watch && !of.table() && of.output != "json" {
				return usage(errors.New("-w prints a table or JSON lines (-o json)"))
			}
			return nil
		},
	}
	lf.add(cmd.Flags())
	of.add(cmd.Flags())
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the list, print each change as it happens")
	return cmd
}

// eventsHint answers kubectl's "get events": jetplane's events are its log.
const eventsHint = `jetplane keeps no Event objects: every change of an object is an event in
its log. 'jetplane history KIND/NAMESPACE/NAME' shows one object's events
(who, when, what changed, why); 'jetplane watch' shows every change as it
happens.`

// isEventsKind reports whether kind is what kubectl users type for Events.
func isEventsKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "ev", "event", "events", "event.events.k8s.io", "events.events.k8s.io":
		return true
	}
	return false
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func isNotFound(err error) bool {
	var apiErr *api.APIError
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound
}

// getOne fetches one object. Without a namespace (nsGiven false) and not
// found cluster-scoped, it looks the name up in every namespace.
func getOne(ctx context.Context, c *api.Client, k api.Key, nsGiven bool) (printer.Item, error) {
	raw, err := c.Get(ctx, k)
	if err == nil {
		its, err := printer.Decode([]json.RawMessage{raw}, api.DecodeObject)
		if err != nil {
			return printer.Item{}, err
		}
		return its[0], nil
	}
	if nsGiven || k.Namespace != "" || !isNotFound(err) {
		return printer.Item{}, err
	}
	list, lerr := c.List(ctx, api.Query{Kind: k.Kind, FieldSelector: "metadata.name=" + k.Name})
	if lerr != nil {
		return printer.Item{}, lerr
	}
	its, derr := printer.Decode(list.Items, api.DecodeObject)
	if derr != nil {
		return printer.Item{}, derr
	}
	switch len(its) {
	case 0:
		return printer.Item{}, &api.APIError{Code: http.StatusNotFound, ErrorResponse: api.ErrorResponse{Error: fmt.Sprintf("%s %q not found in any namespace", k.Kind, k.Name)}}
	case 1:
		return its[0], nil
	}
	var where []string
	for _, it := range its {
		where = append(where, it.Object.GetMetadata().GetNamespace())
	}
	return printer.Item{}, usage(fmt.Errorf("%s %q exists in namespaces %s; say which with -n", k.Kind, k.Name, strings.Join(where, ", ")))
}

// reconcilerLookup asks the server what reconciles each kind, once; nil
// when it cannot say.
func reconcilerLookup(ctx context.Context, c *api.Client) func(string) string {
	rec, _ := kindLookup(ctx, c)
	return rec
}

// kindLookup asks the server, once, what reconciles each kind and which
// printer columns a kind defined by a CustomResourceDefinition has; nils
// when it cannot say.
func kindLookup(ctx context.Context, c *api.Client) (func(string) string, func(string) []printer.Column) {
	resp, err := c.Kinds(ctx)
	if err != nil {
		return nil, nil
	}
	rec := map[string]string{}
	cols := map[string][]printer.Column{}
	for _, k := range resp.Kinds {
		rec[k.Name] = k.Reconciler
		for _, col := range k.Columns {
			cols[k.Name] = append(cols[k.Name], printer.Column{Name: col.Name, JSONPath: col.JSONPath, Priority: col.Priority})
		}
	}
	return func(kind string) string { return rec[kind] }, func(kind string) []printer.Column { return cols[kind] }
}

// phaseHint says why PHASE is "-": objects of kinds nothing reconciles
// are stored only, and no one writes their status.
func phaseHint(w io.Writer, items []printer.Item, reconciler func(string) string) {
	if reconciler == nil {
		return
	}
	var stored []string
	for _, it := range items {
		kind := kindOf(it.Object)
		if it.Object.GetStatus().GetPhase() == "" && reconciler(kind) == "" && !slices.Contains(stored, kind) {
			stored = append(stored, kind)
		}
	}
	if len(stored) > 0 {
		fmt.Fprintf(w, "PHASE is - for %s: stored only, no reconciler writes status (see 'jetplane api-resources', 'jetplane describe').\n", strings.Join(stored, ", "))
	}
}

// newRowStream starts the aligned table a watch prints into; withType adds
// the change's type as the first column.
func newRowStream(w io.Writer, opts printer.Options, withType bool) *printer.Stream {
	cols := printer.NewTable(opts).Columns
	if withType {
		cols = append([]string{"TYPE"}, cols...)
	}
	if opts.NoHeaders {
		cols = nil
	}
	// Room for the values a watch shows later, so its rows line up with
	// the first ones.
	min := map[string]int{"TYPE": len("MODIFIED"), "NAMESPACE": 12, "KIND": 18, "NAME": 20, "GOAL": len("deleted"), "PHASE": 10, "READY": 5, "RESOURCEVERSION": 8, "AGE": 4, "NEXT RUN": 8}
	return printer.NewStream(w, cols, min)
}

// watchRows prints changes after resourceVersion from (0: the current
// objects first) into stream (table output) or as JSON lines (-o json);
// withType adds the change's type first.
func watchRows(ctx context.Context, cmd *cobra.Command, g *globals, q api.Query, from uint64, opts printer.Options, withType bool, stream *printer.Stream) error {
	w := cmd.OutOrStdout()
	c := g.client()
	failures := 0
	c.WatchRetry = func(err error, wait time.Duration) {
		failures++
		if failures == 1 || failures%10 == 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "watch: %v; retrying every %s (Ctrl-C to stop)\n", err, wait)
		}
	}
	json := opts.Format == "json"
	err := c.Watch(ctx, q, from, func(ev api.WatchEvent) error {
		if failures > 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "watch: connected again")
			failures = 0
		}
		if json {
			b, err := jsonMarshal(ev)
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
		if stream == nil {
			stream = newRowStream(w, opts, withType)
		}
		row := printer.ObjectRow(o, opts)
		if withType {
			row = append([]string{ev.Type}, row...)
		}
		stream.Add(row)
		return stream.Flush()
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
