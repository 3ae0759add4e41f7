package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
)

// pki is a test CA with one certificate for 127.0.0.1, usable as server
// and as client (routes present it both ways).
type pki struct {
	CA, Cert, Key string
	pool          *x509.CertPool
}

func newPKI(t testing.TB) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jetplane test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	for path, b := range map[string]*pem.Block{
		p.CA: {Type: "CERTIFICATE", Bytes: caDER}, p.Cert: {Type: "CERTIFICATE", Bytes: der}, p.Key: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// The documented production setup: NATS clients and the API over TLS,
// with credentials and tokens; nothing in clear is accepted.
func TestTLSForNATSAndAPI(t *testing.T) {
	p := newPKI(t)
	a := start(t, app.Config{
		Principals:  principals(),
		NATSTLS:     embedded.TLSConfig{CertFile: p.Cert, KeyFile: p.Key, CAFile: p.CA},
		TLSCertFile: p.Cert, TLSKeyFile: p.Key,
	})
	if !strings.HasPrefix(a.URL(), "https://") {
		t.Fatalf("API URL %s, want https", a.URL())
	}
	secure := &api.Client{BaseURL: a.URL(), Token: "admin-token", HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}}}
	seed(t, secure)
	plain := "http://" + strings.TrimPrefix(a.URL(), "https://")
	if resp, err := http.Get(plain + "/v1/objects"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the API answered plain HTTP")
		}
		resp.Body.Close()
	}
	if _, err := (&api.Client{BaseURL: a.URL(), Token: "admin-token"}).List(context.Background(), api.Query{}); err == nil {
		t.Fatal("a client that cannot verify the API's certificate was answered")
	}

	data, err := a.Creds().Create(auth.RoleSubscriber, "audit")
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "audit.creds")
	if err := os.WriteFile(creds, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the CA the client cannot verify the server and stops.
	if nc, err := events.Connect(events.ConnectOptions{URLs: a.NATSURL(), CredsFile: creds}); err == nil {
		nc.Close()
		t.Fatal("connected to TLS NATS without its CA")
	}
	var nc *nats.Conn
	deadline := time.Now().Add(wait)
	for {
		nc, err = events.Connect(events.ConnectOptions{URLs: a.NATSURL(), CredsFile: creds, CAFile: p.CA})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect over TLS: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Fatal("the connection is not TLS")
	}
	js, _ := jetstream.New(nc)
	if _, err := js.Stream(context.Background(), events.StreamName); err != nil {
		t.Fatalf("read the log over TLS: %v", err)
	}
}

// Three embedded nodes form a JetStream cluster over mutual-TLS routes.
func TestTLSRoutes(t *testing.T) {
	p := newPKI(t)
	store, err := auth.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ports := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	var routes []string
	for _, port := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", port))
	}
	servers := make([]*embedded.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			servers[i], errs[i] = embedded.Start(embedded.Config{
				StoreDir: t.TempDir(), Port: -1, ServerName: fmt.Sprintf("n%d", i+1), AuthDir: store.Dir(),
				Cluster: embedded.ClusterConfig{Name: "tls", Port: ports[i], Routes: routes},
				TLS:     embedded.TLSConfig{CertFile: p.Cert, KeyFile: p.Key, CAFile: p.CA},
			})
		})
	}
	wg.Wait()
	for i, s := range servers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(s.Shutdown)
	}
	nc, err := servers[0].Connect("tls-routes")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		// A three-replica log needs all three nodes, which only the
		// routes connect.
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := events.Open(octx, nc, events.Config{Replicas: 3, Partitions: 2})
		cancel()
		if err == nil {
			if n, err := l.Count(ctx); err != nil || n != 0 {
				t.Fatalf("count %d, %v", n, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replicated log over TLS routes: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
