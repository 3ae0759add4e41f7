package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
)

func newChart(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chart",
		Short: "Manage Helm charts kept by jetplane",
		Example: `  jetplane chart push ./charts/web web:0.1.0
  jetplane apply -f release.yaml                # a HelmRelease naming chart web, version 0.1.0`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "push PATH NAME:VERSION",
		Short: "Store a Helm chart (a directory or a packaged .tgz) for HelmReleases",
		Long: `Package the chart at PATH (a chart directory, or a .tgz made by helm package)
and store it in jetplane's chart store as NAME:VERSION, where a HelmRelease
finds it with spec.chart {name: NAME, version: VERSION}. A pushed version
never changes: pushing other content under it is refused (push a new
version), so a release's revisions, and rollbacks, always find the chart
they were made with.`,
		Example: `  jetplane chart push ./charts/web web:0.1.0
  jetplane chart push web-0.1.0.tgz web:0.1.0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, ok := strings.Cut(args[1], ":")
			if !ok || name == "" || version == "" {
				return fmt.Errorf("%q: want NAME:VERSION, such as web:0.1.0", args[1])
			}
			archive, err := packageChart(args[0])
			if err != nil {
				return err
			}
			resp, err := g.client().PushChart(cmd.Context(), name, version, archive)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chart %s:%s pushed (%d bytes)\n", resp.Name, resp.Version, resp.Bytes)
			return nil
		},
	})
	return cmd
}

// packageChart returns path as a packaged chart: a directory is packaged
// as helm package does; a file is read as it is (checked to load).
func packageChart(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if fi.Size() > render.MaxChartBytes {
			return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, render.ErrTooLarge, fi.Size(), render.MaxChartBytes)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if _, err := render.Load(data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return data, nil
	}
	c, err := loader.LoadDir(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.MkdirTemp("", "jetplane-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out, err := chartutil.Save(c, tmp)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", path, err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return reproducible(data)
}

// reproducible rewrites a packaged chart without the packaging time (helm
// stamps each entry and the gzip header with it), so the same directory
// packages to the same bytes: pushing it again is the same version, not
// other content under the same version.
func reproducible(tgz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func newRollback(g *globals) *cobra.Command {
	var ns string
	var revision int64
	cmd := &cobra.Command{
		Use:   "rollback HelmRelease/NAMESPACE/NAME --to-revision N",
		Short: "Apply an earlier revision of a HelmRelease again, read from its history",
		Long: `Read revision N of a HelmRelease (its generation N) from the log and apply
that spec again: the release moves to a new revision with revision N's chart
and values, runs the chart's pre-rollback and post-rollback hooks, and writes
the objects revision N wrote, as it wrote them (not rendered again: random
values and lookups are revision N's). Nothing but the log is consulted; see
the revisions with 'jetplane history'.`,
		Example: `  jetplane rollback HelmRelease/apps/web --to-revision 2`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseRef(args[0], ns)
			if err != nil {
				return err
			}
			if k.Kind != helmrelease.Kind {
				return fmt.Errorf("%s: only a %s can be rolled back", args[0], helmrelease.Kind)
			}
			if revision < 1 {
				return fmt.Errorf("--to-revision: give the revision to go back to (1 or more)")
			}
			_, evs, err := history(cmd.Context(), g.client(), k)
			if err != nil {
				return err
			}
			o, err := helmrelease.Revision(evs, revision)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			body, err := protojson.Marshal(o)
			if err != nil {
				return err
			}
			resp, err := g.client().Apply(cmd.Context(), "rollback of "+args[0], body, "")
			if err != nil {
				return err
			}
			for _, r := range resp.Results {
				fmt.Fprintf(cmd.OutOrStdout(), "%s rolled back to revision %d (%s)\n", args[0], revision, r.Action)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&revision, "to-revision", 0, "the revision (generation) to apply again")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace, when the reference is KIND/NAME")
	return cmd
}

func newTemplate() *cobra.Command {
	var ns, cluster, kubeVersion, output string
	var valueFiles, sets []string
	var offline bool
	cmd := &cobra.Command{
		Use:   "template NAME CHART",
		Short: "Render a chart locally into the objects a HelmRelease would write",
		Long: `Render CHART (a chart directory or a packaged .tgz) as release NAME, exactly
as a HelmRelease renders it, and print the objects jetplane would store:
the rendered objects themselves, or with --cluster the Apply objects that
push them into that cluster. Nothing is sent to jetplane. Dependencies that
Chart.yaml names but charts/ lacks are fetched, as a HelmRelease fetches
them, from the http(s) repository each names (Chart.lock pins versions),
or read from a file:// path relative to a chart directory; --offline
refuses them instead, as helm does. Hooks and tests,
which a release runs around its revisions (and 'jetplane helm test'), are
not printed: they are listed on stderr.`,
		Example: `  jetplane template web ./charts/web -n shop --set replicas=3
  jetplane template web web-0.1.0.tgz -f values.yaml --cluster prod -o json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "", "yaml", "json"); err != nil {
				return err
			}
			c, err := loadChart(args[1])
			if err != nil {
				return err
			}
			if !offline {
				dir := ""
				if fi, err := os.Stat(args[1]); err == nil && fi.IsDir() {
					dir = args[1] // file:// dependencies are relative to it
				}
				deps, err := helmrelease.Vendor(cmd.Context(), &http.Client{Timeout: 30 * time.Second}, c, dir)
				if err != nil {
					return err
				}
				for _, v := range deps.Versions {
					fmt.Fprintln(cmd.ErrOrStderr(), "dependency fetched:", v)
				}
			}
			values := map[string]any{}
			for _, f := range valueFiles {
				v, err := chartutil.ReadValuesFile(f)
				if err != nil {
					return fmt.Errorf("-f %s: %w", f, err)
				}
				values = chartutil.MergeTables(v.AsMap(), values)
			}
			for _, s := range sets {
				if err := strvals.ParseInto(s, values); err != nil {
					return fmt.Errorf("--set %s: %w", s, err)
				}
			}
			if ns == "" {
				ns = "default"
			}
			res, err := render.Render(c, render.Options{ReleaseName: args[0], Namespace: ns, Revision: 1, KubeVersion: kubeVersion, ForCluster: cluster != "", Values: values})
			if err != nil {
				return err
			}
			for _, u := range res.Unsupported {
				fmt.Fprintln(cmd.ErrOrStderr(), "hook, run by a release, not printed:", u)
			}
			children, err := helmrelease.Children(projections.Key{Kind: helmrelease.Kind, Namespace: ns, Name: args[0]}, cluster, res, nil)
			if err != nil {
				return err
			}
			docs := make([]json.RawMessage, len(children))
			for i, o := range children {
				if docs[i], err = protojson.Marshal(o); err != nil {
					return err
				}
			}
			return writeDocs(cmd.OutOrStdout(), output, docs, false)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "release namespace (default \"default\")")
	cmd.Flags().StringVar(&cluster, "cluster", "", "render Apply objects into this cluster instead of jetplane objects")
	cmd.Flags().StringVar(&kubeVersion, "kube-version", render.DefaultKubeVersion, "Kubernetes version the chart sees (.Capabilities.KubeVersion)")
	cmd.Flags().StringArrayVarP(&valueFiles, "values", "f", nil, "values file (repeatable; later files win)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "a value, key=value (repeatable; wins over files)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output: yaml or json")
	cmd.Flags().BoolVar(&offline, "offline", false, "never fetch dependencies missing from charts/; refuse the chart as helm does")
	return cmd
}

func loadChart(path string) (*chart.Chart, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return loader.LoadDir(path)
	}
	data, err := packageChart(path)
	if err != nil {
		return nil, err
	}
	return render.Load(data)
}
