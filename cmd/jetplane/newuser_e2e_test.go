package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// readmeLine is the one line of the README that starts with prefix.
func readmeLine(t *testing.T, prefix string) string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			found = append(found, sc.Text())
		}
	}
	if len(found) != 1 {
		t.Fatalf("README lines starting %q: %q, want one", prefix, found)
	}
	line, _, _ := strings.Cut(found[0], "#") // the comment
	return strings.TrimSpace(line)
}

// TestNewUserWalk follows the README as a new user does and types what a
// kubectl user types: every answer says what to do, and none is an error
// where kubectl's is not.
func TestNewUserWalk(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	home := t.TempDir() // the user's working directory; serve's data is ./data
	natsPort := freePort(t)
	tokens := writeFile(t, t.TempDir(), "tokens", "adm ops\nrd audit reader shop\n")
	s := serve(t, bin, filepath.Join(home, "data"), "--node=true", "--nats-port", fmt.Sprint(natsPort), "--token-file", tokens, "--node-heartbeat", "200ms")
	as := func(token string, args ...string) result {
		t.Helper()
		return jp(t, bin, s.url, append(args, "--token", token)...)
	}
	adm := func(args ...string) result { t.Helper(); return as("adm", args...) }

	t.Run("image push draws no progress bar off a terminal", func(t *testing.T) {
		if st, err := os.Stat(module); err != nil || st.Size() <= 1<<20 {
			t.Fatalf("the example module must be over 1 MiB, where push draws its bar: %v", err)
		}
		r := adm("image", "push", module, "hello:v1")
		if r.code != 0 || strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "%") || !strings.Contains(r.stdout, "hello:v1 sha256:") {
			t.Errorf("image push with stdout and stderr not terminals: %s", r)
		}
	})

	t.Run("history names every phase in readable rows", func(t *testing.T) {
		if r := adm("apply", "-f", "../../deploy/examples/wasm/pod.yaml"); r.code != 0 {
			t.Fatal(r)
		}
		waitFor(t, "hello Completed", 60*time.Second, func() bool {
			return strings.Contains(adm("get", "Pod", "hello", "-n", "default").stdout, "Completed")
		})
		out := adm("history", "Pod/default/hello").stdout
		if !utf8.ValidString(out) {
			t.Errorf("history is not valid UTF-8:\n%q", out)
		}
		for _, want := range []string{"phase: Pending, state: Registered", "phase: Pending→Running, state: ", "phase: Running→Succeeded, state: Running→Completed"} {
			if !strings.Contains(out, want) {
				t.Errorf("history lacks %q:\n%s", want, out)
			}
		}
		// Every state once and in order, whether each has its own row or
		// one row records several (decision 0089): "state: A→B→C".
		var states []string
		for _, m := range regexp.MustCompile(`state: ([A-Za-z→]+)`).FindAllStringSubmatch(out, -1) {
			for _, st := range strings.Split(m[1], "→") {
				if len(states) == 0 || states[len(states)-1] != st {
					states = append(states, st)
				}
			}
		}
		if want := []string{"Registered", "ImagePull", "Starting", "Running", "Completed"}; !slices.Equal(states, want) {
			t.Errorf("history's states are %v, want %v:\n%s", states, want, out)
		}
	})

	t.Run("diff with changes prints the diff and exits 1 without an error", func(t *testing.T) {
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {v: '%d'}\n"
		dir := t.TempDir()
		if r := adm("apply", "-f", writeFile(t, dir, "v1.yaml", fmt.Sprintf(cm, 1))); r.code != 0 {
			t.Fatal(r)
		}
		r := adm("diff", "-f", writeFile(t, dir, "v2.yaml", fmt.Sprintf(cm, 2)))
		if r.code != 1 || !strings.Contains(r.stdout, "-    v: \"1\"\n+    v: \"2\"") || r.stderr != "" {
			t.Errorf("diff of a change: %s", r)
		}
	})

	t.Run("get all lists every kind; get events points at history", func(t *testing.T) {
		r := adm("get", "all", "-n", "shop")
		if r.code != 0 || !strings.Contains(r.stdout, "settings") {
			t.Errorf("get all: %s", r)
		}
		r = adm("get", "events")
		if r.code != 0 || !strings.Contains(r.stderr, "jetplane history KIND/NAMESPACE/NAME") {
			t.Errorf("get events: %s", r)
		}
	})

	t.Run("kubectl verbs jetplane lacks say what it has instead", func(t *testing.T) {
		for verb, want := range map[string]string{"edit": "jetplane apply -f FILE", "exec": "jetplane logs POD", "top": "jetplane describe Pod",
			"port-forward": "no network", "config": "--server"} {
			r := adm(verb, "deploy/shop/web", "-n", "shop")
			if r.code == 0 || strings.Contains(r.stderr, "unknown command") || strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, want) {
				t.Errorf("%s: want %q in: %s", verb, want, r)
			}
		}
	})

	t.Run("errors name the flags and forms this command line takes", func(t *testing.T) {
		r := as("rd", "get", "cm")
		if r.code == 0 || !strings.Contains(r.stderr, "name one with -n NAMESPACE") || strings.Contains(r.stderr, "namespace=") {
			t.Errorf("a confined token without -n: %s", r)
		}
		r = adm("state", "--at", "yesterday")
		for _, want := range []string{"10m", "log sequence", "RFC 3339"} {
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("state --at yesterday lacks %q: %s", want, r)
			}
		}
	})

	t.Run("a pod's ports draw a warning from the API, with the reason", func(t *testing.T) {
		pod := strings.Replace(readFile(t, "../../deploy/examples/wasm/pod.yaml"), "    image: hello:v1\n", "    image: hello:v1\n    ports: [{containerPort: 8080}]\n", 1)
		pod = strings.Replace(pod, "name: hello\n  namespace", "name: web\n  namespace", 1)
		f := writeFile(t, t.TempDir(), "web.yaml", pod)
		const warning = "Pod default/web: spec.containers[0].ports: nothing will listen: jetplane runs containers as WebAssembly (WASI) modules, which have no network"
		if r := adm("apply", "-f", f); r.code != 0 || !strings.Contains(r.stderr, "Warning: "+warning) {
			t.Errorf("apply of a pod with ports: %s", r)
		}
		// Any HTTP client hears it: in the answer and its headers.
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/apply?dryRun=true", strings.NewReader(pod))
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Warnings []string }
		data, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(data, &body); err != nil || len(body.Warnings) != 1 || !strings.Contains(body.Warnings[0], warning) {
			t.Errorf("the API's answer: %v\n%s", err, data)
		}
		if h := resp.Header.Get("Warning"); !strings.HasPrefix(h, `299 - "`+warning) {
			t.Errorf("Warning header %q", h)
		}
	})

	t.Run("the README's node agent: refused without a credential, told how to get one, runs with it", func(t *testing.T) {
		nats := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
		line := strings.Replace(readmeLine(t, "jetplane node --name edge-1 "), "nats://10.0.0.5:4222", nats, 1)
		args := strings.Fields(line)[1:]
		without := strings.Replace(line, " --nats-creds edge-1.creds", "", 1)
		r := runIn(t, home, bin, strings.Fields(without)[1:]...)
		if r.code == 0 || !strings.Contains(r.stderr, "Authorization Violation") || !strings.Contains(r.stderr, "run 'jetplane creds create --role node edge-1 -o edge-1.creds' and pass --nats-creds edge-1.creds") {
			t.Errorf("node without a credential: %s", r)
		}
		r = runIn(t, home, bin, strings.Fields(readmeLine(t, "jetplane creds create --role node edge-1"))[1:]...)
		if r.code != 0 || !strings.Contains(r.stdout, `wrote edge-1.creds: the node credential "edge-1" (mode 0600`) {
			t.Errorf("creds create -o: %s", r)
		}
		node := exec.Command(bin, args...)
		node.Dir = home
		var log strings.Builder
		node.Stdout, node.Stderr = &log, &log
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
		waitFor(t, "Node edge-1 Ready", 60*time.Second, func() bool {
			return strings.Contains(adm("get", "Node", "edge-1").stdout, "Ready")
		})
	})
}

// runIn runs the binary in dir, as a user in that directory would.
func runIn(t *testing.T, dir, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("jetplane %s: no answer within 30s\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}
