package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/schemas/manifest"
)

func newDelete(g *globals) *cobra.Command {
	var lf listFlags
	var files []string
	var all, ignoreNotFound, wait bool
	var cascade string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME... | KIND/NAME... | KIND/NAMESPACE/NAME... | -f FILE | KIND -l SELECTOR | KIND --all -n NS)",
		Short: "Request deletion of objects",
		Long: `Request deletion: the object's goal becomes deleted, and once it is finalized
it leaves current state. Its history stays in the log.

Every object named is tried: what exists is deleted, what does not is
reported, and the exit code is 3 when something was not found (1 when
something else failed). Deleting a Namespace deletes the objects in it
first, dependents before what they depend on, unless --cascade=orphan.
Without -n, a NAME is found as get finds it: cluster-scoped, or in the one
namespace that has it.

Deleting an owner (a Deployment, ReplicaSet, Job, DaemonSet or CronJob)
deletes what it owns, as kubectl does: --cascade=background (the default)
deletes the owner at once and its dependents after it; foreground keeps the
owner, being deleted, until its dependents are gone; orphan deletes the
owner alone, and its dependents stay without an owner (the owner, applied
again under the same name, adopts them back).`,
		Example: `  jetplane delete cm settings -n default
  jetplane delete ConfigMap/default/settings
  jetplane delete -f app.yaml
  jetplane delete cm -l app=web -n shop
  jetplane delete deploy --all -n shop
  jetplane delete ns shop --wait          # with everything in it
  jetplane delete ns shop --cascade=orphan
  jetplane delete deploy web --cascade=foreground --wait
  jetplane delete deploy web --cascade=orphan   # its ReplicaSets and pods stay`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			switch cascade {
			case "background", "foreground", "orphan":
			default:
				return usage(fmt.Errorf("--cascade: %q: use background (the default), foreground or orphan", cascade))
			}
			ctx := cmd.Context()
			c := g.client()
			var keys []api.Key
			switch {
			case len(files) > 0 && len(args) > 0:
				return usage(errors.New("give either -f or KIND NAME, not both"))
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
			case len(args) == 1 && (lf.selector != "" || lf.fields != "" || all):
				if all && lf.namespace == "" && !lf.allNamespaces {
					return usage(errors.New("--all: say where with -n NAMESPACE (or -A for every namespace)"))
				}
				list, err := c.List(ctx, lf.query(args[0]))
				if err != nil {
					return err
				}
				for _, raw := range list.Items {
					o, err := api.DecodeObject(raw)
					if err != nil {
						return err
					}
					k := manifest.KeyOf(o)
					keys = append(keys, api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name})
				}
				if len(keys) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No objects found.")
					return nil
				}
			case lf.selector != "" || all:
				return usage(errors.New("-l and --all take one KIND"))
			case len(args) >= 1 && strings.Contains(args[0], "/"):
				for _, a := range args {
					k, err := parseRef(a, lf.namespace)
					if err != nil {
						return err
					}
					keys = append(keys, k)
				}
			case len(args) >= 2:
				for _, name := range args[1:] {
					// Without -n, looked up below as get looks it up.
					keys = append(keys, api.Key{Kind: args[0], Namespace: lf.namespace, Name: name})
				}
			default:
				return usage(errors.New("name what to delete: KIND NAME, KIND/NAMESPACE/NAME, -f FILE, KIND -l SELECTOR or KIND --all -n NS"))
			}
			if lf.namespace == "" && len(files) == 0 && !(len(args) == 1 && (lf.selector != "" || lf.fields != "" || all)) {
				// Named without -n: found the way get finds it, cluster-scoped
				// or in the one namespace that has it.
				for i, k := range keys {
					if k.Namespace != "" {
						continue
					}
					it, err := getOne(ctx, c, k, false)
					if err == nil {
						keys[i].Namespace = it.Object.GetMetadata().GetNamespace()
					} else if !isNotFound(err) {
						return err
					}
				}
			}
			var notFound, failed []string
			var deleted []api.Key
			gone := map[string]bool{} // deleted here, some by a Namespace's cascade
			for _, k := range keys {
				if gone[keyString(k)] {
					continue
				}
				resp, err := c.DeleteWith(ctx, k, api.DeleteOptions{Cascade: cascade})
				switch {
				case isNotFound(err):
					if !ignoreNotFound {
						notFound = append(notFound, keyString(k))
						fmt.Fprintf(cmd.ErrOrStderr(), "error: %v\n", err)
					}
					continue
				case errors.Is(err, api.ErrUnreachable):
					return err // nothing further will get through
				case err != nil:
					failed = append(failed, keyString(k))
					fmt.Fprintf(cmd.ErrOrStderr(), "error: %s: %v\n", keyString(k), err)
					continue
				}
				if err := printResults(cmd.OutOrStdout(), "", resp); err != nil {
					return err
				}
				for _, r := range resp.Results {
					deleted = append(deleted, r.Key)
					gone[keyString(r.Key)] = true
				}
			}
			if wait {
				wctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				if err := waitGone(wctx, c, deleted); err != nil {
					return err
				}
			}
			switch {
			case len(failed) > 0:
				return codeError{code: exitError, err: fmt.Errorf("%d of %d deletions failed: %s", len(failed)+len(notFound), len(keys), strings.Join(append(failed, notFound...), ", "))}
			case len(notFound) > 0:
				return codeError{code: exitNotFound, err: fmt.Errorf("not found: %s (the others were deleted)", strings.Join(notFound, ", "))}
			}
			return nil
		},
	}
	lf.add(cmd.Flags())
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "delete the objects of these manifests")
	cmd.Flags().BoolVar(&all, "all", false, "delete every object of KIND in the namespace given with -n")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the objects have left current state (finalized)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().StringVar(&cascade, "cascade", "background", "background, foreground or orphan: what deleting an owner does to its dependents (orphan: a Namespace alone, without its contents)")
	return cmd
}

// waitGone polls until every key has left current state.
func waitGone(ctx context.Context, c *api.Client, keys []api.Key) error {
	for _, k := range keys {
		for {
			_, err := c.Get(ctx, k)
			if isNotFound(err) {
				break
			}
			if err != nil && ctx.Err() == nil {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("--wait: %s is still there (being finalized): %w", keyString(k), ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
