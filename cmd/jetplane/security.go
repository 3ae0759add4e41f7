package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/seal"
)

// secretFlags adds the security flags: --ca-file for every client,
// --show-secrets on every reading command, --purge-secret-data on delete.
func secretFlags(root *cobra.Command, g *globals) {
	root.PersistentFlags().StringVar(&g.caFile, "ca-file", os.Getenv("JETPLANE_CA_FILE"), "CA certificate (PEM) to trust for an https --server (env JETPLANE_CA_FILE)")
	for _, c := range root.Commands() {
		switch c.Name() {
		case "get", "describe", "watch", "history", "state":
			c.Flags().BoolVar(&g.showSecrets, "show-secrets", false, "show secret values in clear (the token must allow it: admin, or a role with +secrets)")
		case "delete":
			c.Flags().BoolVar(&g.purge, "purge-secret-data", false, "also destroy the object's data keys: its secret values become unreadable in current state and in every past event (admins only; cannot be undone)")
		}
	}
}

// newKeys is `jetplane keys`: the key-encryption keys that seal Secrets.
func newKeys() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Short:   "Manage the encryption keys that seal Secrets in the log",
		Example: `  jetplane keys rotate --data ./data`,
	}
	var data, file string
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Put a new primary key-encryption key in the key file",
		Long: `Put a new random key first in the key file (creating the file, mode 0600).
A running jetplane picks it up within a second: Secrets applied from then on
are sealed under data keys wrapped by the new key. The older keys stay in
the file, so every value sealed before remains readable; remove an old key
only once nothing sealed under it is needed.

With several jetplane instances, give each the same file.`,
		Example: `  jetplane keys rotate --data ./data
  jetplane keys rotate --key-file /etc/jetplane/encryption.keys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				file = filepath.Join(data, "auth", "encryption.keys")
			}
			id, err := seal.RotateKeyFile(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "new primary key %s in %s\n", id, file)
			return nil
		},
	}
	rotate.Flags().StringVar(&data, "data", envOr("JETPLANE_DATA", "./data"), "jetplane's data directory, whose auth/encryption.keys is the default key file")
	rotate.Flags().StringVar(&file, "key-file", envOr("JETPLANE_ENCRYPTION_KEY_FILE", ""), "the key file (serve's --encryption-key-file)")
	cmd.AddCommand(rotate)
	return cmd
}

// httpClient trusts --ca-file when given (nil: the default client).
func (g *globals) httpClient() *http.Client {
	if g.caFile == "" {
		return nil
	}
	return &http.Client{Transport: &caTransport{file: g.caFile}}
}

// caTransport loads the CA on first use, so a bad file is reported by
// the request that needs it, with the flag's name.
type caTransport struct {
	file string
	once sync.Once
	rt   http.RoundTripper
	err  error
}

func (t *caTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.once.Do(func() {
		pem, err := os.ReadFile(t.file)
		if err != nil {
			t.err = fmt.Errorf("--ca-file: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			t.err = fmt.Errorf("--ca-file %s: no PEM certificate in it", t.file)
			return
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		t.rt = tr
	})
	if t.err != nil {
		return nil, t.err
	}
	return t.rt.RoundTrip(r)
}
