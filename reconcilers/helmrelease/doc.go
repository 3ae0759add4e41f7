// Package helmrelease is the reconciler of the HelmRelease kind: a Helm
// chart rendered client-side (package render) into children of one group,
// each a managed object with its own history (docs/ARCHITECTURE.md;
// docs/decisions/0022-helm-releases-as-children.md).
//
// A HelmRelease's spec is
//
//	chart: {name: web, version: 0.1.0}   # pushed with `jetplane chart push`
//	# or {name: web, version: ">=0.1 <1", repository: https://charts.example/}
//	values: {replicas: 2}                 # over valuesFrom, over the chart's
//	valuesFrom: [{kind: ConfigMap, name: web-values, key: values.yaml}]
//	releaseNamespace: shop                # default: the release's namespace
//	cluster: prod                         # optional
//
// With a cluster each rendered object becomes an Apply child (the Apply
// reconciler pushes it and corrects drift); without one, the rendered
// objects are jetplane objects. The revision is the release's generation:
// every spec change is a new revision, and rollback is applying an earlier
// revision's spec again, read from the log, after which the release writes
// the objects that revision wrote, read from the log too (decision 0080).
//
// A revision rolls out in stages recorded in the release's status (hooks.go,
// decision 0079): pre hooks, the children (dry-run first in a cluster),
// post hooks; deletion runs pre-delete hooks, deletes the children, then
// post-delete hooks; test hooks run on request (AnnotationTest). Hooks run
// as helm runs them: by weight, waited for, with helm's delete policies.
//
// Dependencies a chart's Chart.yaml names but its charts/ directory lacks
// are fetched from the http(s) repository each names, pinned by
// Chart.lock, and rendered as subcharts, as `helm dependency build` would
// vendor them (dependencies.go, decision 0081).
//
// The package owns rendering requests, the children's shape and their
// pruning. It writes children through the gate (Writer), never to the log
// directly, and reads charts through the Charts store and Helm HTTP
// repositories.
package helmrelease
