package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/schemas"
)

func obj(name, ns, phase string, deps ...string) *schemas.Object {
	o := &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &schemas.ObjectMeta{Name: name, Namespace: ns}, Status: &schemas.Status{Phase: phase}}
	for _, d := range deps {
		o.Metadata.DependsOn = append(o.Metadata.DependsOn, &schemas.ObjectKey{Kind: "ConfigMap", Namespace: ns, Name: d})
	}
	return o
}

func TestFieldSelector(t *testing.T) {
	objs := []*schemas.Object{obj("a", "x", "Running"), obj("b", "x", "Pending"), obj("c", "y", "Running")}
	tests := []struct {
		sel     string
		want    string
		wantErr string
	}{
		{sel: "", want: "a b c"},
		{sel: "status.phase=Running", want: "a c"},
		{sel: "status.phase==Running,metadata.namespace=x", want: "a"},
		{sel: "status.phase!=Running", want: "b"},
		{sel: "metadata.name=b", want: "b"},
		{sel: "metadata.name in (a)", wantErr: "want FIELD=VALUE"},
		{sel: "spec.replicas=1", wantErr: "not a selectable field"},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			f, err := parseFieldSelector(tt.sel)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range f.filter(objs) {
				got = append(got, o.GetMetadata().GetName())
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}

func TestReverseDependencyOrder(t *testing.T) {
	// web → settings → base; api → base; lone stands alone.
	objs := []*schemas.Object{obj("base", "s", ""), obj("settings", "s", "", "base"), obj("web", "s", "", "settings"), obj("api", "s", "", "base"), obj("lone", "s", "")}
	order := reverseDependencyOrder(objs)
	got := fmt.Sprint(order)
	pos := func(name string) int {
		for i, k := range order {
			if k.Name == name {
				return i
			}
		}
		return -1
	}
	if !(pos("web") < pos("settings") && pos("settings") < pos("base") && pos("api") < pos("base")) {
		t.Errorf("order %s: dependents must come before what they depend on", got)
	}
	// A cycle (older logs) still yields every key once.
	cyc := []*schemas.Object{obj("a", "s", "", "b"), obj("b", "s", "", "a")}
	if n := len(reverseDependencyOrder(cyc)); n != 2 {
		t.Errorf("cycle: %d keys, want 2", n)
	}
}
