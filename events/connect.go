package events

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// ConnectOptions describe a connection to an outside NATS deployment.
type ConnectOptions struct {
	// URLs is a comma-separated list of server URLs.
	URLs string
	// Name identifies the connection in server monitoring.
	Name string
	// CredsFile is a NATS credentials file: a JWT and seed, or a
	// credential from `jetplane creds create` (an NKey seed and the
	// inbox prefix its permissions require).
	CredsFile string
	// CAFile, CertFile and KeyFile configure TLS: a CA to trust and an
	// optional client certificate.
	CAFile, CertFile, KeyFile string
}

// Connect dials an outside NATS deployment and keeps reconnecting forever.
func Connect(o ConnectOptions) (*nats.Conn, error) {
	if o.URLs == "" {
		return nil, errors.New("nats url: empty; give a URL such as nats://127.0.0.1:4222")
	}
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1)}
	if o.CredsFile != "" {
		co, err := CredsOptions(o.CredsFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, co...)
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("nats tls: a client certificate needs both a cert file and a key file")
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	nc, err := nats.Connect(o.URLs, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", o.URLs, err)
	}
	return nc, nil
}

// ConsumerPrefixComment starts the comment line of a creds file that says
// what its consumers' names start with (auth.ConsumerPrefix).
const ConsumerPrefixComment = "# consumer-prefix: "

// CredsConsumerPrefix is what the names of the consumers of the credential
// in the creds file at path start with, as its comment says; "" for a
// file without one (a credential issued before consumer tags, decision
// 0122).
func CredsConsumerPrefix(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("nats credentials: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), ConsumerPrefixComment); ok {
			return strings.TrimSpace(p), nil
		}
	}
	return "", nil
}

// CredsOptions are the nats.go options that connect with the credentials
// file at path: a NATS JWT credentials file, or an NKey seed file such as
// `jetplane creds create` writes, whose "# inbox-prefix:" comment names
// the only inbox its permissions let it read.
func CredsOptions(path string) ([]nats.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats credentials: %w", err)
	}
	if bytes.Contains(data, []byte("BEGIN NATS USER JWT")) {
		return []nats.Option{nats.UserCredentials(path)}, nil
	}
	nk, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("nats credentials %s: %w", path, err)
	}
	opts := []nats.Option{nk}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "# inbox-prefix: "); ok && strings.TrimSpace(p) != "_INBOX" {
			opts = append(opts, nats.CustomInboxPrefix(strings.TrimSpace(p)))
		}
	}
	return opts, nil
}
