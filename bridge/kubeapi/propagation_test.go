package kubeapi

import (
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/bridge/gate"
)

func TestPropagationFromDeleteOptions(t *testing.T) {
	policy := func(p metav1.DeletionPropagation) *metav1.DeletionPropagation { return &p }
	yes, no := true, false
	tests := []struct {
		name    string
		query   string
		opts    metav1.DeleteOptions
		want    gate.Propagation
		wantErr bool
	}{
		{name: "none given", want: gate.Background},
		{name: "Foreground", opts: metav1.DeleteOptions{PropagationPolicy: policy(metav1.DeletePropagationForeground)}, want: gate.Foreground},
		{name: "Orphan", opts: metav1.DeleteOptions{PropagationPolicy: policy(metav1.DeletePropagationOrphan)}, want: gate.Orphan},
		{name: "orphanDependents true", opts: metav1.DeleteOptions{OrphanDependents: &yes}, want: gate.Orphan},
		{name: "orphanDependents false", opts: metav1.DeleteOptions{OrphanDependents: &no}, want: gate.Background},
		{name: "in the query", query: "?propagationPolicy=Foreground", want: gate.Foreground},
		{name: "orphanDependents in the query", query: "?orphanDependents=true", want: gate.Orphan},
		{name: "both", opts: metav1.DeleteOptions{OrphanDependents: &yes, PropagationPolicy: policy(metav1.DeletePropagationForeground)}, wantErr: true},
		{name: "unknown", opts: metav1.DeleteOptions{PropagationPolicy: policy("Sideways")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &request{r: httptest.NewRequest("DELETE", "/apis/apps/v1/namespaces/default/deployments/web"+tt.query, nil)}
			got, err := propagation(q, tt.opts)
			if tt.wantErr {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err %v, want a Bad Request", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("propagation = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
