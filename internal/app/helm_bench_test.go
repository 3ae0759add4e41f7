package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

// benchChart is a chart of 100 templates: the release's Namespace and 99
// ConfigMaps; value "changed" reaches only cm-0.
func benchChart() map[string]string {
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: bench\nversion: 1.0.0\n",
		"values.yaml":              "changed: a\nsize: small\n",
		"templates/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: {{ .Release.Namespace }}}\n",
	}
	for i := range 99 {
		v := ".Values.size"
		if i == 0 {
			v = ".Values.changed"
		}
		files[fmt.Sprintf("templates/cm-%d.yaml", i)] = fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  labels: {app: bench}\ndata:\n  index: \"%d\"\n  value: {{ %s | quote }}\n", i, i, v)
	}
	return files
}

// BenchmarkHelmRelease measures a 100-template chart against a real
// apiserver: rendering alone; installing a release until every child is
// Ready, against the same 100 manifests applied as plain Apply objects
// (the reference, same run); and a revision that changes one value, with
// the events it writes.
func BenchmarkHelmRelease(b *testing.B) {
	env := kubeenv.Start(b)
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{
		{Version: "v1", Resource: "namespaces"}, {Version: "v1", Resource: "configmaps"},
	}}
	a, c := startApp(b, app.Config{Clusters: kube.Clusters{cluster}})
	files := benchChart()
	archive := testenv.Chart(b, files)
	if _, err := c.PushChart(b.Context(), "bench", "1.0.0", archive); err != nil {
		b.Fatal(err)
	}
	release := func(name, changed string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: HelmRelease\nmetadata: {name: %s, namespace: apps}\nspec:\n  chart: {name: bench, version: 1.0.0}\n  releaseNamespace: %s\n  cluster: k1\n  values: {changed: %s}\n", name, name, changed)
	}
	waitReady := func(b *testing.B, k projections.Key, gen int64) {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			o := a.Store().Get(k)
			if o != nil && o.GetMetadata().GetGeneration() == gen && o.GetStatus().GetObservedGeneration() == gen && reconcilers.IsReady(o) {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s not Ready at generation %d: %v", k, gen, o.GetStatus())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	apply := func(b *testing.B, y string) {
		if _, err := c.Apply(b.Context(), "bench", []byte(y), ""); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("render", func(b *testing.B) {
		ch, err := render.Load(archive)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := render.Render(ch, render.Options{ReleaseName: "r", Namespace: "r"}); err != nil {
				b.Fatal(err)
			}
		}
	})

	n := 0
	b.Run("install", func(b *testing.B) {
		for b.Loop() {
			n++
			name := fmt.Sprintf("install-%d", n)
			apply(b, release(name, "a"))
			waitReady(b, projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: name}, 1)
			b.StopTimer()
			settle(b, a)
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-all-ready")
	})

	// The reference: the same 100 objects as Apply objects applied at once
	// (what a release writes), waiting for all to be Ready.
	b.Run("plain-apply", func(b *testing.B) {
		ch, err := loader.LoadArchive(strings.NewReader(string(archive)))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			n++
			name := fmt.Sprintf("plain-%d", n)
			res, err := render.Render(ch, render.Options{ReleaseName: name, Namespace: name})
			if err != nil {
				b.Fatal(err)
			}
			children, err := helmrelease.Children(projections.Key{Kind: helmrelease.Kind, Namespace: "plain", Name: name}, "k1", res, nil)
			if err != nil {
				b.Fatal(err)
			}
			var body []byte
			for _, o := range children {
				o.Metadata.Labels = nil // not owned by a release
				j, _ := protojson.Marshal(o)
				body = append(append(append(body, "---\n"...), j...), '\n')
			}
			apply(b, string(body))
			for _, o := range children {
				waitReady(b, projections.ObjectKey(o), 1)
			}
			b.StopTimer()
			settle(b, a)
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-all-ready")
	})

	b.Run("revision", func(b *testing.B) {
		n++ // -count runs this again on the same jetplane: a new release each time
		name := fmt.Sprintf("rev-%d", n)
		k := projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: name}
		apply(b, release(name, "v0"))
		waitReady(b, k, 1)
		group := helmrelease.Group(k)
		var events, childEvents, changed int
		gen := int64(1)
		settle(b, a)
		for b.Loop() {
			before, _ := a.Log().LastSequence(b.Context())
			versions := map[projections.Key]uint64{}
			objs, _ := a.Store().List(projections.Query{Group: group})
			for _, o := range objs {
				versions[projections.ObjectKey(o)] = o.GetMetadata().GetResourceVersion()
			}
			gen++
			apply(b, release(name, fmt.Sprintf("v%d", gen)))
			waitReady(b, k, gen)
			// Count what the change caused, including the writes that
			// trail Ready (the bridge observing the changed object).
			b.StopTimer()
			settle(b, a)
			b.StartTimer()
			after, _ := a.Log().LastSequence(b.Context())
			events += int(after - before)
			objs, _ = a.Store().List(projections.Query{Group: group})
			for _, o := range objs {
				if o.GetMetadata().GetResourceVersion() != versions[projections.ObjectKey(o)] {
					changed++
				}
			}
			childEvents += countChildEvents(b, a, objs, before)
		}
		b.ReportMetric(float64(events)/float64(b.N), "events/revision")
		b.ReportMetric(float64(childEvents)/float64(b.N), "child-events/revision")
		b.ReportMetric(float64(changed)/float64(b.N), "children-changed/revision")
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-ready")
	})

	// A rollback: revision 1's spec read from the history and applied
	// again, as `jetplane rollback --to-revision 1` does, until Ready.
	b.Run("rollback", func(b *testing.B) {
		n++
		name := fmt.Sprintf("rollback-%d", n)
		k := projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: name}
		apply(b, release(name, "v0"))
		waitReady(b, k, 1)
		gen := int64(1)
		for b.Loop() {
			b.StopTimer()
			gen++
			apply(b, release(name, fmt.Sprintf("v%d", gen)))
			waitReady(b, k, gen)
			settle(b, a)
			b.StartTimer()
			hist, err := a.Log().History(b.Context(), k.Proto())
			if err != nil {
				b.Fatal(err)
			}
			old, err := helmrelease.Revision(hist, 1)
			if err != nil {
				b.Fatal(err)
			}
			j, err := protojson.Marshal(old)
			if err != nil {
				b.Fatal(err)
			}
			apply(b, string(j))
			gen++
			waitReady(b, k, gen)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-ready")
	})

	// The helm library's own install, upgrade and rollback of the same
	// chart against the same apiserver, in the same run: the reference.
	helmChart, err := loader.LoadArchive(strings.NewReader(string(archive)))
	if err != nil {
		b.Fatal(err)
	}
	helmConfig := func(b *testing.B, ns string) *action.Configuration {
		flags := genericclioptions.NewConfigFlags(false)
		kc := env.Kubeconfig()
		flags.KubeConfig, flags.Namespace = &kc, &ns
		cfg := new(action.Configuration)
		if err := cfg.Init(flags, ns, "memory", func(string, ...any) {}); err != nil {
			b.Fatal(err)
		}
		return cfg
	}
	helmInstall := func(b *testing.B, cfg *action.Configuration, name string) {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace = name, name
		if _, err := in.RunWithContext(b.Context(), helmChart, map[string]any{"changed": "a"}); err != nil {
			b.Fatal(err)
		}
	}
	helmUpgrade := func(b *testing.B, cfg *action.Configuration, name, changed string) {
		up := action.NewUpgrade(cfg)
		up.Namespace = name
		if _, err := up.RunWithContext(b.Context(), name, helmChart, map[string]any{"changed": changed}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("helm-install", func(b *testing.B) {
		for b.Loop() {
			n++
			name := fmt.Sprintf("helm-install-%d", n)
			helmInstall(b, helmConfig(b, name), name)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-applied")
	})
	b.Run("helm-upgrade", func(b *testing.B) {
		n++
		name := fmt.Sprintf("helm-upgrade-%d", n)
		cfg := helmConfig(b, name)
		helmInstall(b, cfg, name)
		i := 0
		for b.Loop() {
			i++
			helmUpgrade(b, cfg, name, fmt.Sprintf("v%d", i))
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-applied")
	})
	b.Run("helm-rollback", func(b *testing.B) {
		n++
		name := fmt.Sprintf("helm-rollback-%d", n)
		cfg := helmConfig(b, name)
		helmInstall(b, cfg, name)
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			helmUpgrade(b, cfg, name, fmt.Sprintf("v%d", i))
			b.StartTimer()
			rb := action.NewRollback(cfg)
			rb.Version = 1
			if err := rb.Run(name); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-to-applied")
	})
}

// settle waits until the log has taken no event for half a second.
func settle(b *testing.B, a *app.App) {
	last, _ := a.Log().LastSequence(b.Context())
	quiet := time.Now()
	for time.Since(quiet) < 500*time.Millisecond {
		time.Sleep(50 * time.Millisecond)
		if seq, _ := a.Log().LastSequence(b.Context()); seq != last {
			last, quiet = seq, time.Now()
		}
	}
}

// countChildEvents counts the events of the children after sequence from.
func countChildEvents(b *testing.B, a *app.App, children []*schemas.Object, from uint64) int {
	n := 0
	for _, o := range children {
		evs, err := a.Log().History(b.Context(), projections.ObjectKey(o).Proto())
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			if ev.GetSequence() > from {
				n++
			}
		}
	}
	return n
}
