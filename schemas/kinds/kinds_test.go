package kinds

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	seen := []string{"Deployment.apps", "ConfigMap", "Namespace", "Widget.example.com", "Gadget.a.example.com", "Gadget.b.example.com", "Apply", "Policy"}
	tests := []struct {
		name     string
		seen     []string
		want     string
		wantErr  error
		wantText []string // substrings of the error
	}{
		{name: "Deployment", seen: seen, want: "Deployment.apps"},
		{name: "deployment", seen: seen, want: "Deployment.apps"},
		{name: "deployments", seen: seen, want: "Deployment.apps"},
		{name: "DEPLOYMENTS", seen: seen, want: "Deployment.apps"},
		{name: "deploy", seen: seen, want: "Deployment.apps"},
		{name: "Deployment.apps", seen: seen, want: "Deployment.apps"},
		{name: "deploy.apps", seen: seen, want: "Deployment.apps"},
		{name: "deploy.APPS", seen: seen, want: "Deployment.apps"},
		{name: "cm", seen: seen, want: "ConfigMap"},
		{name: "configmaps", seen: seen, want: "ConfigMap"},
		{name: "ns", seen: seen, want: "Namespace"},
		{name: "po", seen: nil, want: "Pod"},
		{name: "pods", seen: nil, want: "Pod"},
		{name: "no", seen: nil, want: "Node"},
		{name: "secret", seen: nil, want: "Secret"},
		{name: "hr", seen: nil, want: "HelmRelease"},
		{name: "helmreleases", seen: nil, want: "HelmRelease"},
		{name: "hr", seen: []string{"HelmRelease.helm.jetplane.io"}, want: "HelmRelease.helm.jetplane.io"},
		{name: "applies", seen: seen, want: "Apply"},
		{name: "policies", seen: seen, want: "Policy"},
		{name: "deploy", seen: nil, want: "Deployment.apps"}, // nothing seen yet: its usual group
		// A bare kind that exists only in another group resolves to it.
		{name: "Widget", seen: seen, want: "Widget.example.com"},
		{name: "widgets", seen: seen, want: "Widget.example.com"},
		{name: "Widget.example.com", seen: seen, want: "Widget.example.com"},
		// A group given explicitly is kept even when nothing of it is seen.
		{name: "Widget.other.io", seen: seen, want: "Widget.other.io"},
		{name: "Gadget", seen: seen, wantErr: ErrAmbiguous, wantText: []string{"Gadget.a.example.com", "Gadget.b.example.com"}},
		{name: "Gadget.b.example.com", seen: seen, want: "Gadget.b.example.com"},
		{name: "Deploymnt", seen: seen, wantErr: ErrUnknown, wantText: []string{`"Deploymnt"`, "did you mean Deployment.apps"}},
		{name: "confgmap", seen: seen, wantErr: ErrUnknown, wantText: []string{"did you mean ConfigMap"}},
		{name: "widgit", seen: seen, wantErr: ErrUnknown, wantText: []string{"Widget.example.com"}},
		{name: "zzzzzzzz", seen: seen, wantErr: ErrUnknown},
		// A capitalised Kind close to nothing known: a kind with no objects
		// yet, taken as written.
		{name: "Probe", seen: seen, want: "Probe"},
		{name: "Gizmo.Example.com", seen: seen, want: "Gizmo.example.com"},
		{name: "Deploymnt.apps", seen: seen, wantErr: ErrUnknown, wantText: []string{"did you mean Deployment.apps"}},
		{name: "", seen: seen, wantErr: ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.name, tt.seen)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Resolve(%q) error = %v, want %v", tt.name, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Resolve(%q) = %q, want %q", tt.name, got, tt.want)
			}
			for _, s := range tt.wantText {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("Resolve(%q) error %v does not mention %q", tt.name, err, s)
				}
			}
		})
	}
}

func TestUnknownSuggestsNothingFar(t *testing.T) {
	_, err := Resolve("zzzzzzzz", nil)
	var ue *UnknownError
	if !errors.As(err, &ue) || len(ue.Suggestions) != 0 {
		t.Fatalf("got %v, want an unknown kind without suggestions", err)
	}
}

func TestPlural(t *testing.T) {
	for in, want := range map[string]string{
		"Deployment": "deployments", "Policy": "policies", "Ingress": "ingresses", "Gateway": "gateways",
		"Box": "boxes", "Patch": "patches", "Mesh": "meshes",
	} {
		if got := Plural(in); got != want {
			t.Errorf("Plural(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCatalogue(t *testing.T) {
	cat := Catalogue([]string{"Widget.example.com", "Deployment.apps"})
	var keys []string
	for _, in := range cat {
		keys = append(keys, in.Key())
	}
	if n := strings.Count(strings.Join(keys, " "), "Deployment.apps"); n != 1 {
		t.Errorf("Deployment.apps listed %d times: %v", n, keys)
	}
	if !slices.Contains(keys, "Widget.example.com") || !slices.Contains(keys, "Pod") {
		t.Errorf("catalogue misses seen or built-in kinds: %v", keys)
	}
	if !slices.IsSortedFunc(cat, func(a, b Info) int { return strings.Compare(a.Kind, b.Kind) }) {
		t.Errorf("catalogue not ordered by kind: %v", keys)
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"deploymnt", "deployment", 1}, {"cofnigmap", "configmap", 1}, {"cnfigmp", "configmap", 2}, {"pod", "pod", 0}, {"", "ab", 2}, {"ab", "ba", 1}} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// Kinds defined by CustomResourceDefinitions resolve by their plural and
// short names before any object of them exists.
func TestResolveDefined(t *testing.T) {
	defined := []Info{{Kind: "Widget", Group: "example.com", Plural: "widgets", Short: []string{"wd"}, Namespaced: true}}
	for _, name := range []string{"wd", "widgets", "Widget", "widget", "Widget.example.com"} {
		if got, err := ResolveDefined(name, nil, defined); err != nil || got != "Widget.example.com" {
			t.Errorf("ResolveDefined(%q) = %q, %v", name, got, err)
		}
	}
	if _, err := ResolveDefined("widgest", nil, defined); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "Widget.example.com") {
		t.Errorf("a typo of a defined kind: %v", err)
	}
	if !slices.ContainsFunc(CatalogueDefined(nil, defined), func(in Info) bool { return in.Key() == "Widget.example.com" && in.Short[0] == "wd" }) {
		t.Error("catalogue lacks the defined kind")
	}
}
