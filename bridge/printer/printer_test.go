package printer

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/schemas"
	"google.golang.org/protobuf/encoding/protojson"
	sigsyaml "sigs.k8s.io/yaml"
)

func items(t *testing.T, docs ...string) []Item {
	t.Helper()
	var out []Item
	for _, d := range docs {
		o := new(schemas.Object)
		if err := protojson.Unmarshal([]byte(d), o); err != nil {
			t.Fatal(err)
		}
		out = append(out, Item{Raw: json.RawMessage(d), Object: o})
	}
	return out
}

var (
	web = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"},"resourceVersion":"7"},"spec":{"replicas":2},"status":{"phase":"Running"}}`
	api = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api","namespace":"shop","resourceVersion":"3"},"spec":{"replicas":10}}`
)

func TestPrint(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		single  bool
		want    []string // lines, in order, exactly
		contain []string
		wantErr string
	}{
		{name: "name", opts: Options{Format: "name"}, want: []string{"Deployment.apps/shop/web", "Deployment.apps/shop/api"}},
		{name: "jsonpath on a list", opts: Options{Format: "jsonpath={.items[*].metadata.name}"}, want: []string{"web api"}},
		{name: "jsonpath on one", single: true, opts: Options{Format: "jsonpath={.spec.replicas}"}, want: []string{"2"}},
		{name: "custom-columns", opts: Options{Format: "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas,PHASE:.status.phase"},
			want: []string{"NAME   REPLICAS   PHASE", "web    2          Running", "api    10         <none>"}},
		{name: "no headers", opts: Options{Format: "custom-columns=NAME:.metadata.name", NoHeaders: true}, want: []string{"web", "api"}},
		{name: "sort by name", opts: Options{Format: "name", SortBy: ".metadata.name"}, want: []string{"Deployment.apps/shop/api", "Deployment.apps/shop/web"}},
		{name: "sort by number", opts: Options{Format: "custom-columns=R:.spec.replicas", NoHeaders: true, SortBy: "{.spec.replicas}"}, want: []string{"2", "10"}},
		{name: "sort by resourceVersion string", opts: Options{Format: "name", SortBy: ".metadata.resourceVersion"}, want: []string{"Deployment.apps/shop/api", "Deployment.apps/shop/web"}},
		{name: "show labels", opts: Options{ShowLabels: true}, contain: []string{"LABELS", "app=web", "<none>"}},
		{name: "wide", opts: Options{Format: "wide", Reconciler: func(string) string { return "" }}, contain: []string{"RECONCILER", "none (stored only)"}},
		{name: "bad format lists the choices", opts: Options{Format: "xml"}, wantErr: "table, wide, name, json, yaml"},
		{name: "bad custom columns", opts: Options{Format: "custom-columns=NAME"}, wantErr: "HEADER:JSONPATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its := items(t, web, api)
			if tt.single {
				its = its[:1]
			}
			var buf bytes.Buffer
			err := Print(&buf, its, tt.single, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if tt.want != nil && strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", buf.String(), strings.Join(tt.want, "\n"))
			}
			for _, c := range tt.contain {
				if !strings.Contains(buf.String(), c) {
					t.Errorf("output lacks %q:\n%s", c, buf.String())
				}
			}
		})
	}
}

func TestStreamAligns(t *testing.T) {
	var buf bytes.Buffer
	s := NewStream(&buf, []string{"TYPE", "KIND", "NAME", "PHASE"}, map[string]int{"TYPE": 8, "KIND": 16, "NAME": 10})
	s.Add([]string{"ADDED", "ConfigMap", "a", "-"})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Add([]string{"MODIFIED", "Deployment.apps", "web-frontend", "Running"})
	s.Add([]string{"DELETED", "Pod", "p", "-"})
	s.Add([]string{"DELETED", "Pod", "a-name-longer-than-its-column", "-"})
	s.Add([]string{"ADDED", "Pod", "q", "-"})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	col := strings.Index(lines[0], "NAME")
	if strings.Index(lines[1], "a ") != col || strings.Index(lines[2], "web-frontend") != col || strings.Index(lines[3], "p ") != col || strings.Index(lines[5], "q ") != col {
		t.Errorf("NAME column not aligned at %d:\n%s", col, buf.String())
	}
}

func TestUnified(t *testing.T) {
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	b := "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\n"
	got := Unified("old", "new", a, b)
	want := "--- old\n+++ new\n@@ -2,9 +2,10 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n j\n+k\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if Unified("a", "b", a, a) != "" {
		t.Error("equal texts give a diff")
	}
}

func TestChangedPaths(t *testing.T) {
	var a, b any
	_ = json.Unmarshal([]byte(`{"spec":{"replicas":2,"image":"x"},"metadata":{"labels":{"a":"1"}}}`), &a)
	_ = json.Unmarshal([]byte(`{"spec":{"replicas":4,"image":"x"},"metadata":{"labels":{"a":"1","b":"2"}}}`), &b)
	got := strings.Join(ChangedPaths(a, b), "; ")
	if want := "metadata.labels.b +; spec.replicas: 2→4"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAge(t *testing.T) {
	now := time.Unix(100000, 0)
	if got := Age(now, now.Add(-90*time.Second)); got != "1m" {
		t.Errorf("Age = %q", got)
	}
}

// A table of objects of one kind with printer columns shows them after
// NAME; priority columns only in wide output; mixed kinds show none.
func TestPrinterColumns(t *testing.T) {
	cols := func(kind string) []Column {
		if kind != "Deployment.apps" {
			return nil
		}
		return []Column{{Name: "Replicas", JSONPath: ".spec.replicas"}, {Name: "Phase", JSONPath: ".status.phase", Priority: 1}}
	}
	var buf bytes.Buffer
	if err := Print(&buf, items(t, web, api), false, Options{Columns: cols}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if f := strings.Fields(lines[0]); len(f) < 5 || f[2] != "NAME" || f[3] != "REPLICAS" || f[4] != "GOAL" {
		t.Errorf("header %q: want REPLICAS after NAME, PHASE only in wide", lines[0])
	}
	if f := strings.Fields(lines[1]); f[2] != "web" || f[3] != "2" {
		t.Errorf("row %q", lines[1])
	}
	buf.Reset()
	if err := Print(&buf, items(t, web, api), false, Options{Format: "wide", Columns: cols}); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(strings.SplitN(buf.String(), "\n", 2)[0]); f[3] != "REPLICAS" || f[4] != "PHASE" {
		t.Errorf("wide header %v", f)
	}
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"shop"}}`
	buf.Reset()
	if err := Print(&buf, items(t, web, cm), false, Options{Columns: cols}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "REPLICAS") {
		t.Errorf("mixed kinds show one kind's columns:\n%s", buf.String())
	}
}

func TestReadyInANotReadyPhase(t *testing.T) {
	cond := func(s string) []*schemas.Condition { return []*schemas.Condition{{Type: "Ready", Status: s}} }
	tests := []struct {
		name string
		st   *schemas.Status
		want string
	}{
		{"none", &schemas.Status{}, "-"},
		{"ready", &schemas.Status{Phase: "Ready", Conditions: cond("True")}, "True"},
		{"running pod", &schemas.Status{Phase: "Running", Conditions: cond("True")}, "True"},
		{"pending pod with a stale True", &schemas.Status{Phase: "Pending", Conditions: cond("True")}, "False"},
		{"not ready", &schemas.Status{Phase: "Error", Conditions: cond("False")}, "False"},
	}
	for _, tt := range tests {
		if got := Ready(tt.st); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestYAMLReadsBackAsKubectlReads prints strings a YAML 1.1 reader would
// take for booleans or numbers, and reads the output back as kubectl
// does: every value must come back a string.
func TestYAMLReadsBackAsKubectlReads(t *testing.T) {
	in := `{"no":"no","a":"yes","b":"on","c":"off","d":"y","e":"N","f":"Off","g":"12:30","h":"true","i":"010","j":"plain"}`
	out, err := ToYAML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	j, err := sigsyaml.YAMLToJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("printed:\n%s\nread back %v", out, got)
	}
}
