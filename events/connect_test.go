package events_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetplane/jetplane/events"
)

// writeCA creates a CA and a server certificate for 127.0.0.1, writes the
// CA's PEM to a file and returns its path with the server's TLS config.
func writeCA(t *testing.T) (string, *tls.Config) {
	t.Helper()
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
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caPath, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}, MinVersion: tls.VersionTLS12}
}

// Connect reaches an outside NATS over TLS when given the CA, and refuses a
// server it cannot verify.
func TestConnectTLS(t *testing.T) {
	caPath, tlsConf := writeCA(t)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, TLS: true, TLSConfig: tlsConf, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("TLS server not ready")
	}
	url := ns.ClientURL()
	nc, err := events.Connect(events.ConnectOptions{URLs: url, CAFile: caPath, Name: "tls-test"})
	if err != nil {
		t.Fatalf("connect with the CA: %v", err)
	}
	nc.Close()
	nc, err = events.Connect(events.ConnectOptions{URLs: url})
	if err == nil {
		nc.Close()
		t.Fatal("connected to a TLS server whose certificate cannot be verified")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("refusal does not name the certificate: %v", err)
	}
}
