package gate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
)

// Every write through the gate hears what its objects ask for that cannot
// work here, whoever writes it: a Pod's ports and a workload template's.
func TestApplyReturnsWarnings(t *testing.T) {
	e := newEnv(t)
	objs := decode(t, `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - {name: main, image: app:v1, ports: [{containerPort: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
      - {name: init, image: app:v1, ports: [{containerPort: 81}]}
      containers:
      - {name: main, image: app:v1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop}
data: {ports: "80"}
`)
	for _, tc := range []struct {
		name string
		run  func() ([]gate.Outcome, error)
	}{
		{"dry run", func() ([]gate.Outcome, error) { return e.gate.DryRun(context.Background(), gate.Admin("t"), objs) }},
		{"apply", func() ([]gate.Outcome, error) { return e.gate.Apply(context.Background(), gate.Admin("t"), objs, "") }},
		{"unchanged", func() ([]gate.Outcome, error) { return e.gate.Apply(context.Background(), gate.Admin("t"), objs, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.run()
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"Pod shop/web: spec.containers[0].ports", "Deployment shop/web: spec.template.spec.initContainers[0].ports", ""}
			for i, o := range out {
				switch {
				case want[i] == "" && len(o.Warnings) != 0:
					t.Errorf("%s: warnings %q, want none", o.Key, o.Warnings)
				case want[i] != "" && (len(o.Warnings) != 1 || !strings.HasPrefix(o.Warnings[0], want[i]+": nothing will listen")):
					t.Errorf("%s: warnings %q, want one starting %q", o.Key, o.Warnings, want[i])
				}
			}
		})
	}
}
