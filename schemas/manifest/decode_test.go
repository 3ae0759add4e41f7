package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// object builds an expected object; spec may be nil for an empty spec.
func object(apiVersion, kind, namespace, name string, spec map[string]any) *schemas.Object {
	s, err := structpb.NewStruct(spec)
	if err != nil {
		panic(err)
	}
	return &schemas.Object{
		ApiVersion: apiVersion,
		Kind:       kind,
		Metadata:   &schemas.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       s,
	}
}

func withMeta(o *schemas.Object, edit func(*schemas.ObjectMeta)) *schemas.Object {
	edit(o.Metadata)
	return o
}

// deploymentYAML is a kind defined by a CustomResourceDefinition, whose
// spec the decoder takes as written (the gate checks it against its schema).
const deploymentYAML = `# a comment before anything
apiVersion: example.com/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 2b1c-ignored
  resourceVersion: "42"
  generation: 7
  creationTimestamp: "2024-01-02T03:04:05Z"
  managedFields: [{manager: kubectl}]
  selfLink: /apis/apps/v1/namespaces/shop/deployments/web
  group: release-1
  labels:
    app: web
    app.kubernetes.io/name: web
    tier: ""
  annotations:
    note: "any text: at all"
  dependsOn:
    - kind: Service
      name: db
    - kind: Deployment.apps
      namespace: other
      name: cache
  finalizers: [jetplane.io/cleanup]
spec:
  replicas: 3
  paused: false
  ratio: 0.5
  max: 9007199254740992
  started: 2001-12-14t21:59:43.10-05:00
  empty: null
  image: "registry.local/web:1.2"
  ports:
    - {name: http, port: 80}
status:
  phase: Running
`

func TestDecodeValid(t *testing.T) {
	web := withMeta(object("example.com/v1", "Deployment", "shop", "web", map[string]any{
		"replicas": 3,
		"paused":   false,
		"ratio":    0.5,
		"max":      float64(1 << 53),
		"started":  "2001-12-14t21:59:43.10-05:00",
		"empty":    nil,
		"image":    "registry.local/web:1.2",
		"ports":    []any{map[string]any{"name": "http", "port": 80}},
	}), func(m *schemas.ObjectMeta) {
		m.Group = "release-1"
		m.Labels = map[string]string{"app": "web", "app.kubernetes.io/name": "web", "tier": ""}
		m.Annotations = map[string]string{"note": "any text: at all"}
		m.DependsOn = []*schemas.ObjectKey{
			{Kind: "Service", Namespace: "shop", Name: "db"},
			{Kind: "Deployment.apps", Namespace: "other", Name: "cache"},
		}
		m.Finalizers = []string{"jetplane.io/cleanup"}
	})
	svc := func(name string) *schemas.Object { return object("v1", "Service", "", name, nil) }

	tests := []struct {
		name  string
		input string
		want  []*schemas.Object
	}{
		{name: "single YAML document", input: deploymentYAML, want: []*schemas.Object{web}},
		{
			name: "multi-document stream with leading, empty and trailing separators",
			input: "---\n# Source: chart/templates/a.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n" +
				"---   \n\n# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n---\n",
			want: []*schemas.Object{svc("a"), svc("b")},
		},
		{
			name:  "CRLF line endings",
			input: "apiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: b\r\n",
			want:  []*schemas.Object{svc("a"), svc("b")},
		},
		{
			name:  "JSON object indented with tabs",
			input: "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Service\",\n\t\"metadata\": {\"name\": \"a\"},\n\t\"spec\": {\"ports\": [{\"port\": 80}]}\n}\n",
			want:  []*schemas.Object{object("v1", "Service", "", "a", map[string]any{"ports": []any{map[string]any{"port": 80}}})},
		},
		{
			// The second element hides brackets, a comma and an escaped
			// quote in a string, which the array splitter must step over.
			name: "JSON array of objects",
			input: ` [
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}},
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b", "annotations": {"x": "with ] , and \" inside"}}}
]`,
			want: []*schemas.Object{svc("a"), withMeta(svc("b"), func(m *schemas.ObjectMeta) {
				m.Annotations = map[string]string{"x": `with ] , and " inside`}
			})},
		},
		{name: "empty JSON array", input: "[]", want: nil},
		{name: "empty input", input: "", want: nil},
		{name: "only comments", input: "# nothing here\n---\n# nor here\n", want: nil},
		{
			name: "kind List is expanded",
			input: `apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
  - apiVersion: v1
    kind: Service
    metadata: {name: a}
  - apiVersion: v1
    kind: Service
    metadata: {name: b}
`,
			want: []*schemas.Object{svc("a"), svc("b")},
		},
		{
			name: "anchors, aliases and merge keys",
			input: `apiVersion: example.com/v1
kind: Widget
metadata: {name: a}
spec:
  base: &base {port: 80, protocol: TCP}
  http:
    <<: *base
    port: 8080
  copy: *base
`,
			want: []*schemas.Object{object("example.com/v1", "Widget", "", "a", map[string]any{
				"base": map[string]any{"port": 80, "protocol": "TCP"},
				"http": map[string]any{"port": 8080, "protocol": "TCP"},
				"copy": map[string]any{"port": 80, "protocol": "TCP"},
			})},
		},
		{
			name:  "null namespace and null spec are absent",
			input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  namespace:\nspec:\n",
			want:  []*schemas.Object{svc("a")},
		},
		{
			name:  "same name in different namespaces and kinds is not a duplicate",
			input: "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: x}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: y}\n---\napiVersion: apps/v1\nkind: Service\nmetadata: {name: a, namespace: x}\n",
			want: []*schemas.Object{
				object("v1", "Service", "x", "a", nil),
				object("v1", "Service", "y", "a", nil),
				object("apps/v1", "Service", "x", "a", nil),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode("test.yaml", []byte(tt.input))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			assertObjects(t, got, tt.want)
		})
	}
}

func assertObjects(t *testing.T, got, want []*schemas.Object) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d objects, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("object %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func svcYAML(name string) string {
	return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n"
}

func TestDecodePathDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", svcYAML("b1")+"---\n"+svcYAML("b2"))
	writeFile(t, dir, "a.json", `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}`)
	writeFile(t, dir, "c.yml", svcYAML("c"))
	writeFile(t, dir, "notes.txt", "not a manifest")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.yaml"), "d.yaml", svcYAML("nested-is-not-read"))

	got, err := DecodePath(dir, nil)
	if err != nil {
		t.Fatalf("DecodePath: %v", err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.Metadata.Name)
	}
	if want := "a b1 b2 c"; strings.Join(names, " ") != want {
		t.Errorf("got objects %q, want %q (sorted by file name, not recursive)", names, want)
	}
}

func TestDecodePathDuplicateAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", svcYAML("x"))
	b := writeFile(t, dir, "b.yaml", svcYAML("y")+"---\n"+svcYAML("x"))
	_, err := DecodePath(dir, nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	if e.Source != b || e.Doc != 2 {
		t.Errorf("error at %s document %d, want %s document 2", e.Source, e.Doc, b)
	}
	if want := "already defined in " + a + ", document 1"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

func TestDecodePathFileAndStdin(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "one.txt", svcYAML("from-file"))

	got, err := DecodePath(file, nil)
	if err != nil || len(got) != 1 || got[0].Metadata.Name != "from-file" {
		t.Errorf("file: got %v, %v", got, err)
	}

	got, err = DecodePath("-", strings.NewReader(svcYAML("from-stdin")))
	if err != nil || len(got) != 1 || got[0].Metadata.Name != "from-stdin" {
		t.Errorf("stdin: got %v, %v", got, err)
	}

	_, err = DecodePath("-", strings.NewReader("kind: Service\n"))
	var e *Error
	if !errors.As(err, &e) || e.Source != "-" {
		t.Errorf("stdin error: got %v, want an *Error with Source \"-\"", err)
	}

	if _, err := DecodePath(filepath.Join(dir, "missing.yaml"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
	if _, err := DecodePath("-", nil); err == nil {
		t.Error("stdin without reader: got no error")
	}
}

func TestKeyOf(t *testing.T) {
	tests := []struct {
		name string
		obj  *schemas.Object
		want string
	}{
		{name: "core group", obj: object("v1", "Service", "ns", "a", nil), want: "Service/ns/a"},
		{name: "named group", obj: object("apps/v1", "Deployment", "ns", "a", nil), want: "Deployment.apps/ns/a"},
		{name: "dotted group, cluster-scoped", obj: object("jetplane.io/v1alpha1", "Node", "", "n1", nil), want: "Node.jetplane.io/n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeyString(KeyOf(tt.obj)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFindCycle(t *testing.T) {
	tests := []struct {
		name  string
		edges map[string][]string
		want  string
	}{
		{name: "empty", edges: nil, want: ""},
		{name: "chain", edges: map[string][]string{"a": {"b"}, "b": {"c"}}, want: ""},
		{name: "diamond", edges: map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}}, want: ""},
		{name: "self loop", edges: map[string][]string{"a": {"a"}}, want: "a a"},
		{name: "three", edges: map[string][]string{"c": {"a"}, "a": {"b"}, "b": {"c"}}, want: "a b c a"},
		{name: "rotated to smallest key", edges: map[string][]string{"a": {"z"}, "z": {"m"}, "m": {"x"}, "x": {"m"}}, want: "m x m"},
		{name: "first of two in sorted order", edges: map[string][]string{"p": {"q"}, "q": {"p"}, "b": {"c", "a"}, "c": {"b"}}, want: "b c b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 { // map order must not matter
				if got := strings.Join(FindCycle(tt.edges), " "); got != tt.want {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestFindCycleLongChainDoesNotModifyInput(t *testing.T) {
	const n = 50_000
	edges := make(map[string][]string, n)
	key := func(i int) string { return fmt.Sprintf("Service/ns/s%06d", i) }
	for i := 0; i < n-1; i++ {
		edges[key(i)] = []string{key(i + 1)}
	}
	if c := FindCycle(edges); c != nil {
		t.Fatalf("chain: got cycle %v", c)
	}
	edges[key(n-1)] = []string{key(0)}
	edges[key(5)] = []string{key(9), key(6)}
	if c := FindCycle(edges); len(c) != n+1 || c[0] != key(0) || c[n] != key(0) {
		t.Fatalf("ring: got a cycle of %d keys starting %v, want %d", len(c), c[:min(3, len(c))], n+1)
	}
	if edges[key(5)][0] != key(9) {
		t.Error("FindCycle reordered the caller's slice")
	}
}

func BenchmarkDecode(b *testing.B) {
	var in strings.Builder
	for i := range 100 {
		in.WriteString(strings.Replace(deploymentYAML, "name: web\n", fmt.Sprintf("name: web-%d\n", i), 1))
		in.WriteString("---\n")
	}
	data := []byte(in.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		objs, err := Decode("bench.yaml", data)
		if err != nil || len(objs) != 100 {
			b.Fatalf("got %d objects, %v", len(objs), err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkDecodeOneJSON decodes one small JSON document, as an API
// client sending one object a request does.
func BenchmarkDecodeOneJSON(b *testing.B) {
	data := []byte(`{"apiVersion":"v1","kind":"Bench","metadata":{"name":"o-1","namespace":"bench"},"spec":{"size":1}}` + "\n---\n")
	b.ReportAllocs()
	for b.Loop() {
		objs, err := Decode("request body", data)
		if err != nil || len(objs) != 1 {
			b.Fatalf("got %d objects, %v", len(objs), err)
		}
	}
}
