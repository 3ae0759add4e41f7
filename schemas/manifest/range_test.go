package manifest_test

import (
	"strings"
	"testing"

	"github.com/jetplane/jetplane/schemas/manifest"
)

// Numbers out of a float64's range are refused naming the field, in YAML
// and in JSON; quoted, they are strings.
func TestOutOfRangeNumbersAreRefused(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a, namespace: d}\nspec: {replicas: 1e400}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a, namespace: d}\nspec: {replicas: -2.5E+999}\n",
		`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "d"}, "spec": {"replicas": 1e400}}`,
	} {
		_, err := manifest.Decode("x.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "spec.replicas") || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%q: %v, want spec.replicas out of range", doc, err)
		}
	}
	objs, err := manifest.Decode("x.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: d}\ndata: {v: '1e400'}\n"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("a quoted 1e400: %v", err)
	}
}
