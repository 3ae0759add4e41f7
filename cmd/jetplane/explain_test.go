package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExplainDocumentsFields: explain KIND[.field] prints the Kubernetes
// API's field docs as kubectl explain does, needs no server, and says
// where jetplane differs.
func TestExplainDocumentsFields(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"a kind", []string{"explain", "pod"}, 0, []string{"KIND:       Pod\nVERSION:    v1\n", "DESCRIPTION:\n    Pod is a collection of containers", "FIELDS:\n", "  spec\t<PodSpec>\n", "  apiVersion\t<string>\n"}},
		{"the README's example", []string{"explain", "pod.spec.containers"}, 0, []string{"FIELD: containers <[]Container>", "  image\t<string>\n"}},
		{"a field through a list", []string{"explain", "po.spec.containers.ports"}, 0, []string{"FIELD: ports <[]ContainerPort>", "containerPort\t<integer>", "JETPLANE:\n    jetplane runs containers as WebAssembly (WASI) modules, which have no\n    network"}},
		{"a kind with its group", []string{"explain", "deploy.apps.spec.strategy"}, 0, []string{"KIND:       Deployment\nVERSION:    apps/v1", "FIELD: strategy <DeploymentStrategy>", "rollingUpdate\t<RollingUpdateDeployment>"}},
		{"a field that does not exist", []string{"explain", "pod.spec.nope"}, 1, []string{`error: field "nope" does not exist in Pod.spec; its fields are volumes, initContainers, containers,`}},
		{"jetplane's own kind", []string{"explain", "hr"}, 1, []string{"HelmRelease is jetplane's own kind", "Helm charts"}},
		{"the old form runs placement, with a note", []string{"--server", "http://127.0.0.1:1", "explain", "Pod/default/web"}, 1, []string{"note: a scheduling decision is now 'jetplane placement Pod/default/web'", "cannot reach the jetplane server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := execute(context.Background(), tt.args, &out, &out)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
