package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

func newHelm(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "helm",
		Short: "Helm operations on a HelmRelease (test)",
		Long: `Helm operations on a HelmRelease that go beyond applying it: "helm test"
runs the release's test hooks. Installs, upgrades and rollbacks are applies of
HelmRelease objects ("jetplane apply", "jetplane rollback").`,
		Example: `  jetplane helm test HelmRelease/apps/web
  jetplane helm test web -n apps --timeout 10m`,
	}
	cmd.AddCommand(newHelmTest(g))
	return cmd
}

func newHelmTest(g *globals) *cobra.Command {
	var ns string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "test HelmRelease/NAMESPACE/NAME",
		Short: "Run a HelmRelease's test hooks (helm.sh/hook: test) and report as helm test does",
		Long: `Ask the release to run its chart's test hooks once, in helm's order (by
helm.sh/hook-weight, then name), with their delete policies, and wait for the
outcome. The command fails when a test fails, naming it. A release that
targets a cluster runs them there; one of jetplane objects runs them on
jetplane's nodes.`,
		Example: `  jetplane helm test HelmRelease/apps/web
  jetplane helm test web -n apps --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[0]
			if !strings.Contains(ref, "/") {
				ref = helmrelease.Kind + "/" + ref
			}
			k, err := parseRef(ref, ns)
			if err != nil {
				return err
			}
			if k.Kind != helmrelease.Kind {
				return fmt.Errorf("%s: only a %s has tests", args[0], helmrelease.Kind)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cur, err := getRelease(ctx, g.client(), k)
			if err != nil {
				return err
			}
			o := desiredRelease(cur)
			token := strconv.FormatInt(time.Now().UnixNano(), 36)
			o.Metadata.Annotations[helmrelease.AnnotationTest] = token
			body, err := protojson.Marshal(o)
			if err != nil {
				return err
			}
			if _, err := g.client().Apply(ctx, "helm test of "+ref, body, ""); err != nil {
				return err
			}
			for {
				cur, err = getRelease(ctx, g.client(), k)
				if err != nil {
					return err
				}
				if f := cur.GetStatus().GetDetails().GetFields(); f["tested"].GetStringValue() == token {
					return printTests(cmd.OutOrStdout(), cur)
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("%s: tests not finished after %s: %s", ref, timeout, cur.GetStatus().GetMessage())
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace, when the reference is NAME or KIND/NAME")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the tests")
	return cmd
}

func getRelease(ctx context.Context, c *api.Client, k api.Key) (*schemas.Object, error) {
	raw, err := c.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	o := &schemas.Object{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("%s/%s/%s: %w", k.Kind, k.Namespace, k.Name, err)
	}
	return o, nil
}

// desiredRelease is what a writer gives of cur: what the log and the
// gate add left out.
func desiredRelease(cur *schemas.Object) *schemas.Object {
	md := cur.GetMetadata()
	ann := map[string]string{}
	for k, v := range md.GetAnnotations() {
		if !strings.HasPrefix(k, "gate.jetplane.dev/") {
			ann[k] = v
		}
	}
	return &schemas.Object{ApiVersion: cur.GetApiVersion(), Kind: cur.GetKind(), Spec: cur.GetSpec(),
		Metadata: &schemas.ObjectMeta{Name: md.GetName(), Namespace: md.GetNamespace(), Labels: md.GetLabels(), Annotations: ann,
			Group: md.GetGroup(), DependsOn: md.GetDependsOn()}}
}

// printTests writes the outcome as helm test does; an error when a test
// failed.
func printTests(w io.Writer, o *schemas.Object) error {
	f := o.GetStatus().GetDetails().GetFields()
	status := "deployed"
	if o.GetStatus().GetPhase() == "Failed" {
		status = "failed"
	}
	fmt.Fprintf(w, "NAME: %s\nNAMESPACE: %s\nSTATUS: %s\nREVISION: %d\n", o.GetMetadata().GetName(), o.GetMetadata().GetNamespace(),
		status, int(f["revision"].GetNumberValue()))
	var failed []string
	tests := f["tests"].GetListValue().GetValues()
	if len(tests) == 0 {
		fmt.Fprintln(w, "TEST SUITE: None")
	}
	for _, t := range tests {
		name, phase, _ := strings.Cut(t.GetStringValue(), ": ")
		fmt.Fprintf(w, "TEST SUITE:     %s\nLast Started:   %s\nLast Completed: %s\nPhase:          %s\n", name,
			f["testStarted"].GetStringValue(), f["testCompleted"].GetStringValue(), phase)
		if strings.HasPrefix(phase, "Failed") {
			failed = append(failed, name+" "+phase)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d test(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}
