//go:build unix

package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Timeouts. Generous because `go test ./...` runs packages in parallel on
// small machines; a healthy start takes a few seconds.
const (
	etcdReadyTimeout      = 60 * time.Second
	apiserverReadyTimeout = 2 * time.Minute
	apiserverStopGrace    = 15 * time.Second
	etcdStopGrace         = 10 * time.Second
	startAttempts         = 3 // a free port may be taken before the child binds it
)

// Env is one etcd and one kube-apiserver serving it, both on loopback.
// Its methods are for the test goroutine; RESTConfig and Kubeconfig are safe
// to call from any goroutine.
type Env struct {
	dir        string
	bins       Binaries
	creds      *credentials
	etcdURL    string
	apiPort    int
	kubeconfig string
	etcd       *process
	apiserver  *process // nil while stopped
	fsync      bool
}

// Option configures Start.
type Option func(*Env)

// Fsync makes etcd fsync its log before it answers each write, as a
// production etcd does. Without it etcd runs with --unsafe-no-fsync: the
// data is thrown away with the test. Benchmarks that compare with a
// jetplane that fsyncs every write (--sync=always) need it.
func Fsync() Option { return func(e *Env) { e.fsync = true } }

// Start runs etcd and kube-apiserver in a temporary directory, waits until
// the apiserver's /readyz passes, and stops both through tb.Cleanup.
//
// A binary missing from the cache is built first (see EnsureBinaries); only
// with -short, and not under CI=true, does Start skip the test instead.
func Start(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	if testing.Short() && os.Getenv("CI") != "true" && !cached() {
		tb.Skip("kube-apiserver and etcd are not built yet: run without -short, or `go run ./internal/testenv/kube/prebuild`")
	}
	bins, err := EnsureBinaries(context.Background(), tb.Logf)
	if err != nil {
		tb.Fatal(err)
	}
	e := &Env{dir: tb.TempDir(), bins: bins}
	for _, o := range opts {
		o(e)
	}
	if e.creds, err = writeCredentials(e.dir); err != nil {
		tb.Fatal(err)
	}
	if err := e.startEtcd(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() && e.apiserver != nil {
			tb.Logf("last lines of kube-apiserver's log:\n%s", e.apiserver.logTail(30))
		}
		if e.apiserver != nil {
			e.apiserver.stop(apiserverStopGrace)
			e.apiserver = nil
		}
		e.etcd.stop(etcdStopGrace)
	})
	var startErr error
	for range startAttempts {
		ports, err := freePorts(1)
		if err != nil {
			tb.Fatal(err)
		}
		e.apiPort = ports[0]
		if startErr = e.startAPIServer(tb); startErr == nil || !errors.Is(startErr, errPortTaken) {
			break
		}
		_ = os.Remove(filepath.Join(e.dir, "kube-apiserver.log"))
	}
	if startErr != nil {
		tb.Fatal(startErr)
	}
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(e.kubeconfigData(), e.kubeconfig); err != nil {
		tb.Fatal(err)
	}
	return e
}

// RESTConfig returns a new admin config for the apiserver: bearer token,
// TLS verified against the Env's CA. The caller may change the copy.
func (e *Env) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            e.host(),
		BearerToken:     e.creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), e.creds.caPEM...)},
		// Tests create objects in bursts; client-go's default of 5 QPS
		// would make them wait on the client, not the server.
		QPS:   1000,
		Burst: 2000,
	}
}

// Kubeconfig returns the path of a kubeconfig file for the same admin
// credentials, for tests that drive a CLI. It lives in the Env's temporary
// directory.
func (e *Env) Kubeconfig() string { return e.kubeconfig }

// EtcdURL is the client URL of the Env's etcd, which serves etcd's JSON
// gateway (/v3/kv/...). Tests use it to change storage behind the
// apiserver's back while it is stopped, such as deleting an object that no
// watch then sees deleted. The apiserver keeps its objects under
// /registry/<resource>/<namespace>/<name>.
func (e *Env) EtcdURL() string { return e.etcdURL }

// StopAPIServer stops kube-apiserver (SIGTERM, so it shuts down as in a
// rolling restart) and leaves etcd running. Open watches end.
func (e *Env) StopAPIServer(tb testing.TB) {
	tb.Helper()
	if e.apiserver == nil {
		tb.Fatal("StopAPIServer: kube-apiserver is not running")
	}
	e.apiserver.stop(apiserverStopGrace)
	e.apiserver = nil
}

// StartAPIServer starts kube-apiserver again on the same port, etcd and
// credentials, and waits for /readyz. Existing configs keep working.
func (e *Env) StartAPIServer(tb testing.TB) {
	tb.Helper()
	if e.apiserver != nil {
		tb.Fatal("StartAPIServer: kube-apiserver is already running")
	}
	if err := e.startAPIServer(tb); err != nil {
		tb.Fatal(err)
	}
}

// RestartAPIServer is StopAPIServer then StartAPIServer.
func (e *Env) RestartAPIServer(tb testing.TB) {
	tb.Helper()
	e.StopAPIServer(tb)
	e.StartAPIServer(tb)
}

func (e *Env) host() string { return "https://127.0.0.1:" + strconv.Itoa(e.apiPort) }

var errPortTaken = errors.New("port taken")

func (e *Env) startEtcd() error {
	var err error
	for range startAttempts {
		ports, perr := freePorts(2)
		if perr != nil {
			return perr
		}
		clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=jetplane-test",
			"--data-dir=" + filepath.Join(e.dir, "etcd"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=jetplane-test=" + peerURL,
		}
		if !e.fsync {
			// The data is thrown away with the test.
			args = append(args, "--unsafe-no-fsync")
		}
		var p *process
		if p, err = startProcess("etcd", e.bins.Etcd, args, e.dir, filepath.Join(e.dir, "etcd.log")); err != nil {
			return err
		}
		start := time.Now()
		client := &http.Client{Timeout: 5 * time.Second}
		err = waitReady(p, etcdReadyTimeout, func() bool {
			resp, err := client.Get(clientURL + "/health")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if err == nil {
			e.etcd, e.etcdURL = p, clientURL
			return nil
		}
		p.stop(etcdStopGrace)
		if !p.portTaken() {
			return fmt.Errorf("etcd on %s: %w after %s; last lines of its log:\n%s",
				clientURL, err, time.Since(start).Round(time.Millisecond), p.logTail(30))
		}
		_ = os.RemoveAll(filepath.Join(e.dir, "etcd"))
		_ = os.Remove(p.log)
	}
	return fmt.Errorf("etcd: %w", err)
}

// startAPIServer starts kube-apiserver on e.apiPort and waits for /readyz.
func (e *Env) startAPIServer(tb testing.TB) error {
	c := e.creds
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.apiPort),
		"--cert-dir=" + filepath.Join(e.dir, "apiserver-certs"),
		"--tls-cert-file=" + c.certFile,
		"--tls-private-key-file=" + c.keyFile,
		"--etcd-servers=" + e.etcdURL,
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.saPubFile,
		"--service-account-signing-key-file=" + c.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No controller-manager creates the "default" ServiceAccount, so
		// this plugin would reject every Pod (as in envtest).
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
		// On SIGTERM, drain ordinary requests, then give open watches 2s
		// before exiting; by default a single open watch holds shutdown
		// for the full 60s request timeout.
		"--shutdown-send-retry-after=true",
	}
	p, err := startProcess("kube-apiserver", e.bins.APIServer, args, e.dir, filepath.Join(e.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	client, err := e.httpClient()
	if err != nil {
		p.stop(apiserverStopGrace)
		return err
	}
	start := time.Now()
	err = waitReady(p, apiserverReadyTimeout, func() bool {
		req, _ := http.NewRequest(http.MethodGet, e.host()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		p.stop(apiserverStopGrace)
		if p.portTaken() {
			return fmt.Errorf("kube-apiserver on port %d: %w", e.apiPort, errPortTaken)
		}
		return fmt.Errorf("kube-apiserver on %s: %w after %s; last lines of its log:\n%s",
			e.host(), err, time.Since(start).Round(time.Millisecond), p.logTail(30))
	}
	tb.Logf("kube-apiserver ready on %s in %s", e.host(), time.Since(start).Round(time.Millisecond))
	e.apiserver = p
	return nil
}

func (e *Env) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.creds.caPEM) {
		return nil, errors.New("kube-apiserver CA: no certificate")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}, nil
}

func (e *Env) kubeconfigData() clientcmdapi.Config {
	const name = "jetplane-test"
	return clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			name: {Server: e.host(), CertificateAuthorityData: e.creds.caPEM},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			adminUser: {Token: e.creds.token},
		},
		Contexts: map[string]*clientcmdapi.Context{
			name: {Cluster: name, AuthInfo: adminUser},
		},
		CurrentContext: name,
	}
}

// waitReady polls ready until it passes, the child exits, or timeout ends.
func waitReady(p *process, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if exited, err := p.exited(); exited {
			return fmt.Errorf("%w (%v)", errExited, err)
		}
		if ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePorts asks the kernel for n distinct free loopback ports. Another
// process may take one before our child binds it; callers retry on that.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
