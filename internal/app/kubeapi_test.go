package app_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// kubectl runs one kubectl binary against one server.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

func (k kubectl) cmd(ctx context.Context, stdin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(filepath.Dir(k.kubeconfig), "cache"),
		// kubectl edit's editor: changes a value in place.
		"KUBE_EDITOR=sed -i s/sqlite/postgres/")
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// run returns what kubectl printed (stdout, then stderr) and whether it
// succeeded.
func (k kubectl) run(stdin string, args ...string) (string, bool) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := k.cmd(ctx, stdin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String() + errOut.String(), err == nil
}

func (k kubectl) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, ok := k.run(stdin, args...)
	if !ok {
		k.t.Fatalf("kubectl %s: %s", strings.Join(args, " "), out)
	}
	return out
}

func kubectlBin(t *testing.T) string {
	t.Helper()
	bin, err := kubeenv.EnsureKubectl(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// jetplaneKubeconfig writes a kubeconfig for a with token. Kubernetes
// clients send a token only over TLS, so a serves HTTPS with a
// self-signed certificate, which the kubeconfig trusts.
func jetplaneKubeconfig(t testing.TB, url, token string, caPEM []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: jetplane, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: me, user: {token: %q}}]
contexts: [{name: jetplane, context: {cluster: jetplane, user: me}}]
current-context: jetplane
`, url, base64.StdEncoding.EncodeToString(caPEM), token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const shopManifests = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop, labels: {app: web}}
data: {color: blue, size: "3"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: db, namespace: shop, labels: {app: db}}
data: {engine: sqlite}
`

// volatile hides what differs between any two servers: ages, times,
// uids, resourceVersions and generations.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`(?m)^(\S+\s+.*?)\s+\d+[smhd]\S*\s*$`), // the AGE column
	regexp.MustCompile(`(?m)^[-+ ]?\s*(creationTimestamp|resourceVersion|uid):.*\n`),
	regexp.MustCompile(`/tmp/[A-Z]+-\d+/|\d{4}-\d\d-\d\d \d\d:\d\d:[\d.]+ \+0000|@@ .* @@`), // kubectl diff's headers
}

func normalize(s string) string {
	s = volatile[0].ReplaceAllString(s, "$1 <age>")
	s = volatile[1].ReplaceAllString(s, "")
	s = volatile[2].ReplaceAllString(s, "<diff>")
	return s
}

// TestKubectl drives jetplane with kubectl v1.36.3 built from source and
// compares what it prints with what the same commands print against
// kube-apiserver.
func TestKubectl(t *testing.T) {
	bin := kubectlBin(t)
	a, caPEM := startTLSApp(t, app.Config{Tokens: map[string]string{"tok-alice": "alice"}})
	jet := kubectl{t: t, bin: bin, kubeconfig: jetplaneKubeconfig(t, a.URL(), "tok-alice", caPEM)}
	env := kubeenv.Start(t)
	kube := kubectl{t: t, bin: bin, kubeconfig: env.Kubeconfig()}

	steps := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"apply creates", shopManifests, []string{"apply", "-f", "-"}},
		{"apply again changes nothing", shopManifests, []string{"apply", "-f", "-"}},
		{"get table", "", []string{"get", "configmaps", "-n", "shop", "-l", "app"}},
		{"get one", "", []string{"get", "cm/web", "-n", "shop"}},
		{"label selector", "", []string{"get", "cm", "-n", "shop", "-l", "app=db", "-o", "name"}},
		{"field selector", "", []string{"get", "cm", "-n", "shop", "--field-selector", "metadata.name=web", "-o", "name"}},
		{"jsonpath of data", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data}"}},
		{"apply configures", strings.Replace(shopManifests, "color: blue", "color: green", 1), []string{"apply", "-f", "-"}},
		{"server-side apply", strings.Replace(shopManifests, "color: blue", "color: teal", 1), []string{"apply", "--server-side", "-f", "-"}},
		{"after server-side apply", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data}"}},
		{"merge patch", "", []string{"patch", "cm", "web", "-n", "shop", "--type=merge", "-p", `{"data":{"size":"4"}}`}},
		{"strategic patch", "", []string{"patch", "cm", "web", "-n", "shop", "-p", `{"metadata":{"labels":{"tier":"front"}}}`}},
		{"json patch", "", []string{"patch", "cm", "db", "-n", "shop", "--type=json", "-p", `[{"op":"add","path":"/data/mode","value":"wal"}]`}},
		{"after patches", "", []string{"get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data} {.metadata.labels}"}},
		{"yaml round trip is unchanged", "", []string{"get", "cm", "web", "-n", "shop", "-o", "yaml"}},
		{"diff", strings.Replace(shopManifests, "size: \"3\"", "size: \"5\"", 1), []string{"diff", "-f", "-"}},
		{"edit", "", []string{"edit", "cm", "db", "-n", "shop"}},
		{"after edit", "", []string{"get", "cm", "db", "-n", "shop", "-o", "jsonpath={.data}"}},
		{"dry run", "", []string{"delete", "cm", "db", "-n", "shop", "--dry-run=server"}},
		{"still there", "", []string{"get", "cm", "db", "-n", "shop", "-o", "name"}},
		{"delete", "", []string{"delete", "cm", "db", "-n", "shop"}},
		{"gone", "", []string{"get", "cm", "db", "-n", "shop"}},
		{"api-resources", "", []string{"api-resources", "--api-group=", "-o", "name"}},
		{"explain", "", []string{"explain", "configmap.data"}},
	}
	for _, st := range steps {
		jo, jok := jet.run(st.stdin, st.args...)
		ko, kok := kube.run(st.stdin, st.args...)
		if st.name == "yaml round trip is unchanged" {
			// The object as read applies back, on both alike, and its
			// content stays as it was.
			before := jet.ok("", "get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data} {.metadata.labels}")
			jo, jok = jet.run(jo, "apply", "-f", "-")
			ko, kok = kube.run(ko, "apply", "-f", "-")
			if after := jet.ok("", "get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data} {.metadata.labels}"); after != before {
				t.Errorf("%s: the object changed: %s, then %s", st.name, before, after)
			}
		}
		if st.name == "api-resources" {
			// jetplane serves a subset of the core group, and its own kinds.
			for _, want := range []string{"configmaps\n", "namespaces\n", "pods\n", "secrets\n", "helmreleases\n"} {
				if !strings.Contains(jo, want) {
					t.Errorf("%s: %q missing:\n%s", st.name, want, jo)
				}
			}
			continue
		}
		if jok != kok || normalize(jo) != normalize(ko) {
			t.Errorf("kubectl %s (%s):\njetplane (ok %v):\n%s\nkube-apiserver (ok %v):\n%s", strings.Join(st.args, " "), st.name, jok, jo, kok, ko)
		}
	}
}

// TestKubectlAsOf reads history through the Kubernetes API: ?asOf= a
// resourceVersion answers the state then.
func TestKubectlAsOf(t *testing.T) {
	bin := kubectlBin(t)
	a, caPEM := startTLSApp(t, app.Config{Tokens: map[string]string{"tok-alice": "alice"}})
	k := kubectl{t: t, bin: bin, kubeconfig: jetplaneKubeconfig(t, a.URL(), "tok-alice", caPEM)}
	k.ok(shopManifests, "apply", "-f", "-")
	rv := k.ok("", "get", "cm", "db", "-n", "shop", "-o", "jsonpath={.metadata.resourceVersion}") // written last
	k.ok(strings.Replace(shopManifests, "color: blue", "color: red", 1), "apply", "-f", "-")
	k.ok("", "delete", "cm", "db", "-n", "shop")
	if out := k.ok("", "get", "--raw", "/api/v1/namespaces/shop/configmaps/web?asOf="+rv); !strings.Contains(out, `"color":"blue"`) {
		t.Fatalf("web as of %s: %s", rv, out)
	}
	if out := k.ok("", "get", "--raw", "/api/v1/namespaces/shop/configmaps?asOf="+rv); !strings.Contains(out, `"name":"db"`) {
		t.Fatalf("list as of %s lacks db: %s", rv, out)
	}
	if out := k.ok("", "get", "cm", "web", "-n", "shop", "-o", "jsonpath={.data.color}"); out != "red" {
		t.Fatalf("web now: %s", out)
	}
}

// TestKubectlWatch follows kubectl get -w while objects change.
func TestKubectlWatch(t *testing.T) {
	bin := kubectlBin(t)
	a, caPEM := startTLSApp(t, app.Config{Tokens: map[string]string{"tok-alice": "alice"}})
	k := kubectl{t: t, bin: bin, kubeconfig: jetplaneKubeconfig(t, a.URL(), "tok-alice", caPEM)}
	k.ok(shopManifests, "apply", "-f", "-")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := k.cmd(ctx, "", "get", "cm", "-n", "shop", "-w", "--output-watch-events")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %q", want)
				}
				if regexp.MustCompile(want).MatchString(l) {
					return
				}
			case <-deadline:
				t.Fatalf("no line matching %q within 30s", want)
			}
		}
	}
	expect(`^EVENT\s+NAME\s+DATA\s+AGE`)
	expect(`^ADDED\s+db\s+1\s`)
	expect(`^ADDED\s+web\s+2\s`)
	k.ok(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"}},"data":{"color":"red"}}`, "apply", "-f", "-")
	expect(`^MODIFIED\s+web\s+1\s`)
	k.ok("", "delete", "cm", "db", "-n", "shop")
	expect(`^DELETED\s+db\s+1\s`)
}

// startTLSApp runs jetplane serving HTTPS with a new self-signed
// certificate for 127.0.0.1 and returns the certificate (PEM).
func startTLSApp(t testing.TB, cfg app.Config) (*app.App, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jetplane"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cfg.TLSCertFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.TLSKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	a := runApp(t, cfg)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, certPEM
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jetplane not ready after 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
