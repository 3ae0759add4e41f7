package helmrelease

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func release(t *testing.T, spec map[string]any) *schemas.Object {
	t.Helper()
	s, err := structpb.NewStruct(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &schemas.Object{ApiVersion: "v1", Kind: Kind, Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: s}
}

func TestDecodeSpec(t *testing.T) {
	chart := map[string]any{"name": "web", "version": "0.1.0"}
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"minimal", map[string]any{"chart": chart}, ""},
		{"everything", map[string]any{"chart": map[string]any{"name": "web", "version": ">=1.0.0", "repository": "https://charts.example/"},
			"values": map[string]any{"a": 1.0}, "valuesFrom": []any{map[string]any{"kind": "Secret", "name": "s", "optional": true}},
			"releaseNamespace": "shop", "cluster": "prod"}, ""},
		{"no chart", map[string]any{}, "spec.chart: required"},
		{"unknown field", map[string]any{"chart": chart, "valuez": map[string]any{}}, "spec.valuez: unknown field"},
		{"version not semver", map[string]any{"chart": map[string]any{"name": "web", "version": "latest"}}, "spec.chart.version: \"latest\" is not a version"},
		{"range without repository", map[string]any{"chart": map[string]any{"name": "web", "version": ">=1"}}, "a pushed chart is named by an exact version"},
		{"repository not http", map[string]any{"chart": map[string]any{"name": "web", "version": "1.0.0", "repository": "oci://x"}}, "spec.chart.repository"},
		{"values a string", map[string]any{"chart": chart, "values": "a: 1"}, "spec.values: must be an object (the chart's values), not a string"},
		{"valuesFrom kind", map[string]any{"chart": chart, "valuesFrom": []any{map[string]any{"kind": "Pod", "name": "x"}}}, "spec.valuesFrom[0].kind: \"Pod\": must be ConfigMap or Secret"},
		{"valuesFrom optional", map[string]any{"chart": chart, "valuesFrom": []any{map[string]any{"kind": "Secret", "name": "x", "optional": "yes"}}}, "spec.valuesFrom[0].optional: must be true or false, not a string"},
		{"cluster a number", map[string]any{"chart": chart, "cluster": 3.0}, "spec.cluster: must be a string, not a number"},
		{"release namespace", map[string]any{"chart": chart, "releaseNamespace": "Shop"}, "spec.releaseNamespace: \"Shop\" is not a namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := decodeSpec(release(t, tc.spec))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.ReleaseNamespace == "" {
					t.Fatal("release namespace not defaulted")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestDiffSpecs(t *testing.T) {
	prev := map[string]any{"chart": map[string]any{"name": "web", "version": "0.1.0"},
		"values": map[string]any{"replicas": 2.0, "image": map[string]any{"tag": "1", "pull": "always"}, "gone": true}}
	next := map[string]any{"chart": map[string]any{"name": "web", "version": "0.2.0"},
		"values": map[string]any{"replicas": 3.0, "image": map[string]any{"tag": "2", "pull": "always"}, "added": "x"}}
	want := `values: .added added "x", .gone removed, .image.tag "1" → "2", .replicas 2 → 3; chart.version "0.1.0" → "0.2.0"`
	if got := DiffSpecs(prev, next); got != want {
		t.Fatalf("diff:\n got %s\nwant %s", got, want)
	}
	if got := DiffSpecs(prev, prev); got != "" {
		t.Fatalf("no change: %q", got)
	}
}

func TestRevision(t *testing.T) {
	applied := func(gen int64, version string) *schemas.Event {
		o := release(t, map[string]any{"chart": map[string]any{"name": "web", "version": version}})
		o.Metadata.Generation, o.Metadata.Uid = gen, "u"
		return &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Object: o}
	}
	h := []*schemas.Event{applied(1, "0.1.0"), {Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED}, applied(2, "0.2.0"), applied(2, "0.2.0")}
	o, err := Revision(h, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v := o.GetSpec().GetFields()["chart"].GetStructValue().GetFields()["version"].GetStringValue(); v != "0.1.0" || o.GetMetadata().GetUid() != "" || o.GetMetadata().GetGeneration() != 0 {
		t.Fatalf("revision 1: %v", o)
	}
	if _, err := Revision(h, 3); err == nil || err.Error() != "revision 3 is not in the release's history (revisions: [1 2])" {
		t.Fatalf("missing revision: %v", err)
	}
}

func TestApplyName(t *testing.T) {
	rel := projections.Key{Kind: Kind, Namespace: "apps", Name: "web"}
	if got := ApplyName(rel, projections.Key{Kind: "Deployment.apps", Namespace: "shop", Name: "web"}); got != "web.deployment.apps.shop.web" {
		t.Fatalf("short: %s", got)
	}
	long := ApplyName(rel, projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: strings.Repeat("a", 80)})
	other := ApplyName(rel, projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: strings.Repeat("a", 81)})
	if len(long) > 63 || long == other || len(validation.IsDNS1123Subdomain(long)) > 0 || len(validation.IsValidLabelValue(long)) > 0 {
		t.Fatalf("long names: %s, %s", long, other)
	}
}
