package kubeapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

func TestKubeObjectShape(t *testing.T) {
	spec := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name string
		obj  *schemas.Object
		want string
	}{
		{
			name: "a ConfigMap's data at the top level, no spec, no generation",
			obj: &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap",
				Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: 7, Generation: 2},
				Spec:     spec(map[string]any{"data": map[string]any{"a": "1"}})},
			want: `{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"name":"web","namespace":"shop","resourceVersion":"7"}}`,
		},
		{
			name: "a Deployment keeps its spec and generation; status where Kubernetes puts it",
			obj: &schemas.Object{ApiVersion: "apps/v1", Kind: "Deployment",
				Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: 9, Generation: 3, Labels: map[string]string{"app": "web"}},
				Spec:     spec(map[string]any{"replicas": 2}),
				Status:   &schemas.Status{ObservedGeneration: 3, Details: spec(map[string]any{"readyReplicas": 2})}},
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":3,"labels":{"app":"web"},"name":"web","namespace":"shop","resourceVersion":"9"},"spec":{"replicas":2},"status":{"observedGeneration":3,"readyReplicas":2}}`,
		},
		{
			name: "jetplane's own metadata stays where its manifests write it",
			obj: &schemas.Object{ApiVersion: "v1", Kind: "Apply",
				Metadata: &schemas.ObjectMeta{Name: "a", Namespace: "shop", Group: "release-1", DependsOn: []*schemas.ObjectKey{{Kind: "Apply", Name: "b"}}},
				Spec:     spec(map[string]any{"cluster": "prod"})},
			want: `{"apiVersion":"v1","kind":"Apply","metadata":{"dependsOn":[{"kind":"Apply","name":"b"}],"group":"release-1","name":"a","namespace":"shop","resourceVersion":"0"},"spec":{"cluster":"prod"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(kubeObject(tt.obj, ""))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestSelectorMatches(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "p", "namespace": "shop", "labels": map[string]any{"app": "web", "tier": "front"}},
		"spec":     map[string]any{"nodeName": "n1"},
		"status":   map[string]any{"phase": "Running"},
	}
	tests := []struct {
		labels, fields string
		want           bool
	}{
		{"", "", true},
		{"app=web", "", true},
		{"app in (web,db),tier!=back", "", true},
		{"app=db", "", false},
		{"!tier", "", false},
		{"", "status.phase=Running,spec.nodeName=n1", true},
		{"", "metadata.name!=p", false},
		{"app=web", "status.phase=Pending", false},
	}
	for _, tt := range tests {
		r := newRequest(t, "/api/v1/pods?labelSelector="+escape(tt.labels)+"&fieldSelector="+escape(tt.fields))
		sel, err := parseSelector(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.matches(obj); got != tt.want {
			t.Errorf("labels %q fields %q: got %v, want %v", tt.labels, tt.fields, got, tt.want)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c := cursor{Seq: 42, Namespace: "shop", Name: "web"}
	got, err := decodeCursor(c.encode())
	if err != nil || got != c {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := decodeCursor("not-a-token!"); err == nil {
		t.Fatal("a token the server did not give decoded")
	}
}

func newRequest(t *testing.T, target string) *http.Request {
	t.Helper()
	return httptest.NewRequest(http.MethodGet, target, nil)
}

func escape(s string) string { return url.QueryEscape(s) }
