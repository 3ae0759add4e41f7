package events

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// ConnectOptions describe a connection to an outside NATS deployment.
type ConnectOptions struct {
	// URLs is a comma-separated list of server URLs.
	URLs string
	// Name identifies the connection in server monitoring.
	Name string
	// CredsFile is a NATS credentials file (JWT and seed).
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
		opts = append(opts, nats.UserCredentials(o.CredsFile))
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
