package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
)

// completeObjects completes kinds for the first argument and names of the
// kind's objects for the next ones, asking the server. With refs, the
// first argument completes as KIND/NAMESPACE/NAME too.
func completeObjects(g *globals, refs bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		c := g.client()
		ns, _ := cmd.Flags().GetString("namespace")
		if len(args) == 0 {
			if kind, rest, ok := strings.Cut(toComplete, "/"); ok {
				return completeRefs(ctx, c, kind, rest), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
			}
			resp, err := c.Kinds(ctx)
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			var out []cobra.Completion
			for _, k := range resp.Kinds {
				if !strings.HasPrefix(strings.ToLower(k.Name), strings.ToLower(toComplete)) {
					continue
				}
				out = append(out, cobra.CompletionWithDesc(k.Name, k.Plural))
			}
			directive := cobra.ShellCompDirectiveNoFileComp
			if refs {
				directive |= cobra.ShellCompDirectiveNoSpace
			}
			return out, directive
		}
		list, err := c.List(ctx, api.Query{Kind: args[0], Namespace: ns})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, raw := range list.Items {
			o, err := api.DecodeObject(raw)
			if err != nil {
				continue
			}
			if n := o.GetMetadata().GetName(); strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeRefs completes KIND/NAMESPACE/NAME (or KIND/NAME) references.
func completeRefs(ctx context.Context, c *api.Client, kind, rest string) []cobra.Completion {
	list, err := c.List(ctx, api.Query{Kind: kind})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, raw := range list.Items {
		o, err := api.DecodeObject(raw)
		if err != nil {
			continue
		}
		ref := o.GetMetadata().GetName()
		if ns := o.GetMetadata().GetNamespace(); ns != "" {
			ref = ns + "/" + ref
		}
		if strings.HasPrefix(ref, rest) {
			out = append(out, kind+"/"+ref)
		}
	}
	return out
}
