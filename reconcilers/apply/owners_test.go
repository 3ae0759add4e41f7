package apply

import (
	"slices"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func TestOwners(t *testing.T) {
	r, err := New(Config{Clusters: map[string]*rest.Config{"prod": {Host: "https://127.0.0.1:1"}}, State: fakeState{}})
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]string{LabelApplyNamespace: "team", LabelApplyName: "web", "app": "web"}
	rec := func(ns string, labels map[string]string) *schemas.ObjectRecord {
		return &schemas.ObjectRecord{Kind: "Deployment", Metadata: &schemas.ObjectMeta{Namespace: ns, Name: "web", Labels: labels}}
	}
	tests := []struct {
		name string
		rec  *schemas.ObjectRecord
		want []projections.Key
	}{
		{"observed and owned", rec("prod/shop", owned), []projections.Key{{Kind: Kind, Namespace: "team", Name: "web"}}},
		{"observed cluster-scoped", rec("prod/", owned), []projections.Key{{Kind: Kind, Namespace: "team", Name: "web"}}},
		{"owned by a cluster-scoped Apply", rec("prod/shop", map[string]string{LabelApplyNamespace: "", LabelApplyName: "web"}),
			[]projections.Key{{Kind: Kind, Namespace: "", Name: "web"}}},
		{"desired state with the labels", rec("shop", owned), nil},
		{"observed, no labels", rec("prod/shop", nil), nil},
		{"observed, name label only", rec("prod/shop", map[string]string{LabelApplyName: "web"}), nil},
		{"observed, namespace label only", rec("prod/shop", map[string]string{LabelApplyNamespace: "team"}), nil},
		{"nil record", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Owners(tt.rec); !slices.Equal(got, tt.want) {
				t.Errorf("Owners = %v; want %v", got, tt.want)
			}
		})
	}

	t.Run("allocations", func(t *testing.T) {
		o, d := rec("prod/shop", owned), rec("shop", owned)
		if n := testing.AllocsPerRun(100, func() { r.Owners(o) }); n != 1 {
			t.Errorf("owned: %v allocations; want 1 (the result)", n)
		}
		if n := testing.AllocsPerRun(100, func() { r.Owners(d) }); n != 0 {
			t.Errorf("not owned: %v allocations; want 0", n)
		}
	})
}

func TestNewValidates(t *testing.T) {
	ok := &rest.Config{Host: "https://127.0.0.1:1"}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no clusters", Config{State: fakeState{}}},
		{"empty name", Config{Clusters: map[string]*rest.Config{"": ok}, State: fakeState{}}},
		{"slash in name", Config{Clusters: map[string]*rest.Config{"a/b": ok}, State: fakeState{}}},
		{"nil config", Config{Clusters: map[string]*rest.Config{"a": nil}, State: fakeState{}}},
		{"no state", Config{Clusters: map[string]*rest.Config{"a": ok}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
}

// fakeState is a projection holding a fixed set of objects.
type fakeState map[projections.Key]*schemas.Object

func (s fakeState) Get(k projections.Key) *schemas.Object { return s[k] }
