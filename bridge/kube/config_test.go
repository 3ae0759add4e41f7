package kube_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/jetplane/jetplane/bridge/kube"
)

// TestParseRejects checks that every bad clusters document is rejected
// with a *ConfigError naming the field.
func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, doc string
		// wantField is the field the error names; wantIn a part of its
		// message.
		wantField, wantIn string
	}{
		{name: "empty", doc: "", wantIn: "empty"},
		{name: "no clusters", doc: "clusters: []", wantField: "clusters", wantIn: "at least one cluster"},
		{name: "unknown field", doc: "clusters:\n- name: a\n  kubeConfig: x\n", wantIn: "kubeConfig"},
		{name: "not a list", doc: "clusters: prod", wantIn: "cannot unmarshal"},
		{name: "no name", doc: "clusters:\n- resources: [{version: v1, resource: configmaps}]", wantField: "clusters[0].name", wantIn: "required"},
		{name: "name with slash", doc: "clusters:\n- name: prod/eu\n  resources: [{version: v1, resource: configmaps}]", wantField: "clusters[0].name", wantIn: "DNS-1123"},
		{name: "upper-case name", doc: "clusters:\n- name: Prod\n  resources: [{version: v1, resource: configmaps}]", wantField: "clusters[0].name"},
		{name: "duplicate name", doc: "clusters:\n- name: a\n  resources: [{version: v1, resource: configmaps}]\n- name: a\n  resources: [{version: v1, resource: services}]", wantField: "clusters[1].name", wantIn: "unique"},
		{name: "no resources", doc: "clusters:\n- name: a", wantField: "clusters[0].resources", wantIn: "at least one resource"},
		{name: "no version", doc: "clusters:\n- name: a\n  resources: [{resource: configmaps}]", wantField: "clusters[0].resources[0].version", wantIn: "required"},
		{name: "group in version", doc: "clusters:\n- name: a\n  resources: [{version: apps/v1, resource: deployments}]", wantField: "clusters[0].resources[0].version", wantIn: "group"},
		{name: "no resource", doc: "clusters:\n- name: a\n  resources: [{version: v1}]", wantField: "clusters[0].resources[0].resource", wantIn: "required"},
		{name: "kind for resource", doc: "clusters:\n- name: a\n  resources: [{version: v1, resource: ConfigMap}]", wantField: "clusters[0].resources[0].resource", wantIn: "plural"},
		{name: "bad group", doc: "clusters:\n- name: a\n  resources: [{group: Apps_, version: v1, resource: deployments}]", wantField: "clusters[0].resources[0].group"},
		{name: "bad namespace", doc: "clusters:\n- name: a\n  resources: [{version: v1, resource: configmaps, namespace: My.NS}]", wantField: "clusters[0].resources[0].namespace"},
		{name: "bad selector", doc: "clusters:\n- name: a\n  resources: [{version: v1, resource: configmaps, labelSelector: 'app in ('}]", wantField: "clusters[0].resources[0].labelSelector"},
		{name: "overlap", doc: "clusters:\n- name: a\n  resources:\n  - {version: v1, resource: configmaps, namespace: shop}\n  - {version: v1, resource: configmaps}", wantField: "clusters[0].resources[1]", wantIn: "already watches"},
		{name: "overlap across versions", doc: "clusters:\n- name: a\n  resources:\n  - {group: apps, version: v1, resource: deployments}\n  - {group: apps, version: v1beta2, resource: deployments}", wantField: "clusters[0].resources[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kube.Parse([]byte(tt.doc))
			var ce *kube.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if ce.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("err = %q (field %q), want field %q and %q in the message", err, ce.Field, tt.wantField, tt.wantIn)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for name, doc := range map[string]string{
		"yaml": `
clusters:
- name: prod
  kubeconfig: prod.kubeconfig
  context: admin
  resources:
  - {version: v1, resource: configmaps, namespace: shop}
  - {version: v1, resource: configmaps, namespace: web}
  - {group: apps, version: v1, resource: deployments, labelSelector: "app in (web, api)"}
  - {version: v1, resource: namespaces}
- name: staging
  resources: [{version: v1, resource: services}]
`,
		"json": `{"clusters": [{"name": "prod", "resources": [{"version": "v1", "resource": "configmaps", "labelSelector": "app=web"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			cs, err := kube.Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if cs[0].Name != "prod" || cs[0].Resources[0].Resource != "configmaps" {
				t.Fatalf("parsed %+v", cs)
			}
		})
	}
}

// TestLoadFile checks what only a file can get wrong: the kubeconfig it
// names (found relative to the file) and the context.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"k": {Server: "https://k.example:6443"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "t"}},
		Contexts:       map[string]*clientcmdapi.Context{"admin": {Cluster: "k", AuthInfo: "u"}, "other": {Cluster: "k", AuthInfo: "u"}},
		CurrentContext: "other",
	}
	if err := clientcmd.WriteToFile(kc, filepath.Join(dir, "prod.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const res = "\n  resources: [{version: v1, resource: configmaps}]\n"

	good := write("good.yaml", "clusters:\n- name: prod\n  kubeconfig: prod.kubeconfig\n  context: admin"+res)
	cs, err := kube.LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cs.RESTConfig("prod")
	if err != nil || rc.Host != "https://k.example:6443" || rc.BearerToken != "t" {
		t.Fatalf("RESTConfig = %+v, %v", rc, err)
	}
	if _, err := cs.RESTConfig("nope"); err == nil || !strings.Contains(err.Error(), "prod") {
		t.Fatalf("RESTConfig of an unknown cluster: %v; want an error listing prod", err)
	}

	// ~/ is the home directory.
	t.Setenv("HOME", dir)
	if cs, err := kube.LoadFile(write("home.yaml", "clusters:\n- name: prod\n  kubeconfig: ~/prod.kubeconfig"+res)); err != nil || cs[0].Kubeconfig != filepath.Join(dir, "prod.kubeconfig") {
		t.Fatalf("LoadFile with ~/: %v, %v", cs, err)
	}

	tests := []struct {
		name, path, wantField, wantIn string
	}{
		{name: "missing file", path: filepath.Join(dir, "absent.yaml"), wantIn: "no such file"},
		{name: "missing kubeconfig", path: write("nokc.yaml", "clusters:\n- name: prod\n  kubeconfig: absent.kubeconfig"+res), wantField: "clusters[0].kubeconfig", wantIn: "no such file"},
		{name: "unknown context", path: write("noctx.yaml", "clusters:\n- name: prod\n  kubeconfig: prod.kubeconfig\n  context: root"+res), wantField: "clusters[0].context", wantIn: "admin, other"},
		{name: "bad resource", path: write("bad.yaml", "clusters:\n- name: prod\n  resources: [{version: v1}]\n"), wantField: "clusters[0].resources[0].resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kube.LoadFile(tt.path)
			var ce *kube.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantIn) || !strings.HasPrefix(err.Error(), tt.path) {
				t.Fatalf("err = %v; want a *ConfigError of %s naming field %q with %q", err, tt.path, tt.wantField, tt.wantIn)
			}
		})
	}
}

// TestNewRejects: a bridge is never built from a configuration that does
// not validate.
func TestNewRejects(t *testing.T) {
	log, st := logAndState(t)
	tests := []struct {
		name      string
		clusters  kube.Clusters
		wantField string
	}{
		{name: "rest and kubeconfig", clusters: kube.Clusters{{Name: "a", REST: &rest.Config{}, Kubeconfig: "x", Resources: []kube.Resource{configMaps("")}}}, wantField: "clusters[0].kubeconfig"},
		{name: "bad name", clusters: kube.Clusters{{Name: "a_b", REST: &rest.Config{}, Resources: []kube.Resource{configMaps("")}}}, wantField: "clusters[0].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kube.New(kube.Config{Clusters: tt.clusters, Log: log, State: st})
			var ce *kube.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField {
				t.Fatalf("err = %v, want a *ConfigError naming %s", err, tt.wantField)
			}
		})
	}
	if _, err := kube.New(kube.Config{Clusters: kube.Clusters{{Name: "a", Resources: []kube.Resource{configMaps("")}}}}); err == nil {
		t.Fatal("New without a log and state succeeded")
	}
}
