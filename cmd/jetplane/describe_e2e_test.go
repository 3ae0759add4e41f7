package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const describeManifest = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
stringData: {password: hunter2-not-shown}
---
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: shop}
spec:
  nodeName: local
  restartPolicy: Never
  containers:
  - name: hello
    image: hello:v1
    args: ["-n", "1"]
    env:
    - {name: GREETING_NAME, value: jetplane}
    - name: DB_PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
    resources: {limits: {memory: 64Mi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: hello:v1
        env:
        - name: DB_PASSWORD
          valueFrom: {secretKeyRef: {name: db, key: password}}
`

// describe shows a pod's containers as kubectl does (image, state, exit
// code, readiness, restarts, environment with secret values as
// references), and a workload's pod template; delete finds a pod named
// without -n the way get does.
func TestDescribeContainersAndDeleteWithoutNamespace(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	s := serve(t, bin, t.TempDir(), "--node=true")
	run(t, bin, s, "image", "push", module, "hello:v1")
	f := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(f, []byte(describeManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", f)
	waitFor(t, "hello Succeeded", 60*time.Second, func() bool {
		return phaseOf(t, bin, s, "Pod", "hello", "-n", "shop").Status.Phase == "Succeeded"
	})

	out := run(t, bin, s, "describe", "po", "hello")
	for _, want := range []string{
		"Containers:\n  hello:\n",
		"    Image:           hello:v1\n",
		"    Image ID:        sha256:",
		"    Args:\n      -n\n      1\n",
		"    State:           Terminated\n      Reason:          Completed\n      Exit Code:       0\n",
		"    Last State:      <none>\n",
		"    Ready:           false\n",
		"    Restart Count:   0\n",
		"    Limits:\n      memory:          64Mi\n",
		"      GREETING_NAME:   jetplane\n",
		"      DB_PASSWORD:     <set to the key 'password' in secret 'db'>  Optional: false\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe po hello lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Fatalf("describe shows a secret's value:\n%s", out)
	}
	out = run(t, bin, s, "describe", "deploy", "web")
	for _, want := range []string{
		"Pod Template:\n  Containers:\n    web:\n",
		"      Image:           hello:v1\n",
		"        DB_PASSWORD:     <set to the key 'password' in secret 'db'>  Optional: false\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe deploy web lacks %q:\n%s", want, out)
		}
	}

	if out := run(t, bin, s, "delete", "po", "hello"); !strings.Contains(out, "Pod/shop/hello deleted") {
		t.Fatalf("delete po hello: %s", out)
	}
	waitFor(t, "hello gone", 30*time.Second, func() bool {
		_, err := runErr(bin, s, "get", "po", "hello", "-n", "shop")
		return err != nil
	})
	if out, err := runErr(bin, s, "delete", "po", "hello"); err == nil || !strings.Contains(out, "not found") {
		t.Fatalf("delete po hello once gone: %v\n%s", err, out)
	}
}
