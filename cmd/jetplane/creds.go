package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/atomicfile"
)

// newCreds is `jetplane creds`: NATS credentials of the embedded server,
// edited in its credentials store on disk (the running server reloads
// them), so handing out access takes access to the data directory.
func newCreds() *cobra.Command {
	var data, dir string
	store := func() (*auth.Store, error) {
		if dir == "" {
			dir = filepath.Join(data, "auth")
		}
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("credentials store %s: %w; run jetplane serve on --data %s once, or give --auth-dir", dir, err, data)
		}
		return auth.Open(dir)
	}
	cmd := &cobra.Command{
		Use:   "creds",
		Short: "Hand out, list and revoke NATS credentials for subscribers and node agents",
		Long: `jetplane's embedded NATS server admits only credentials from its store
(--data/auth, or --nats-auth-dir of serve). 'creds create' adds one and prints its
creds file; a running server admits it within a second. 'creds revoke' removes
one; a running server disconnects it within a second.

Roles:
  subscriber  read the log (JP_EVENTS), the state and snapshot buckets and pod
              logs through consumers it creates; publish no event, write no
              bucket, delete or change nothing, list no consumers (name
              yours starting with the file's consumer-prefix: no other
              credential can find them)
  node        the node agent of node NAME: heartbeat in JP_NODES under NAME,
              watch NAME's keys in JP_NODEWORK, publish on jp.node.NAME.>
              (status requests and logs), read images; nothing else
  controller  an out-of-process controller of --kinds: read the log like a
              subscriber, keep its replicas' membership in its own bucket,
              and write status and finalization of its kinds only, through
              the instances (see the README, "Write a controller")

Connect with the NKey seed in the file and the inbox prefix its comment names:
  nats --server nats://127.0.0.1:4222 --nkey audit.creds --inbox-prefix _INBOX.sub.audit stream info JP_EVENTS`,
		Example: `  jetplane creds create --role node edge-1 -o edge-1.creds
  jetplane creds ls
  jetplane creds revoke edge-1`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&data, "data", envOr("JETPLANE_DATA", "./data"), "jetplane's data directory (env JETPLANE_DATA)")
	pf.StringVar(&dir, "auth-dir", "", "credentials store, if not DATA/auth")

	var role, out string
	var kinds []string
	create := &cobra.Command{
		Use:   "create --role subscriber|node|controller [--kinds KIND,...] NAME",
		Short: "Create a credential and print its creds file (or write it with -o, mode 0600)",
		Example: `  jetplane creds create --role subscriber audit -o audit.creds
  jetplane creds create --role node worker-1 > worker-1.creds
  jetplane creds create --role controller --kinds Widget.example.com widgets -o widgets.creds`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			data, err := s.CreateWithKinds(auth.Role(role), args[0], kinds)
			if err != nil {
				return err
			}
			waitLoaded(cmd, s)
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := atomicfile.Write(out, data, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: the %s credential %q (mode 0600; it is a secret)\n", out, role, args[0])
			if p, err := events.CredsConsumerPrefix(out); err == nil && p != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "its consumers' names start with %s: no other credential can find them\n", p)
			}
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "", "subscriber, node or controller (required)")
	create.Flags().StringSliceVar(&kinds, "kinds", nil, "the kinds a controller runs, as keys name them (Widget.example.com); one kind has one controller")
	create.Flags().StringVarP(&out, "output", "o", "", "write the creds file here (mode 0600) instead of stdout")
	_ = create.MarkFlagRequired("role")

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the credentials handed out, revoked ones included",
		Example: `  jetplane creds ls
  jetplane creds ls --data /var/lib/jetplane`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			list, err := s.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tROLE\tCREATED\tREVOKED\tKEY")
			for _, c := range list {
				if len(c.Kinds) > 0 {
					c.Role += auth.Role("(" + strings.Join(c.Kinds, ",") + ")")
				}
				revoked := "-"
				if c.Revoked != nil {
					revoked = c.Revoked.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Role, c.Created.Format(time.RFC3339), revoked, c.Key)
			}
			return w.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke NAME",
		Short:   "Revoke a credential: a running server disconnects it and refuses it from then on",
		Example: `  jetplane creds revoke edge-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			if err := s.Revoke(args[0]); err != nil {
				return err
			}
			waitLoaded(cmd, s)
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	}
	var ttl time.Duration
	var plain bool
	token := &cobra.Command{
		Use:   "token CREDS-FILE",
		Short: "Print a short-lived API token signed by a controller credential, as a kubeconfig exec plugin reads it",
		Long: `A controller credential connects to NATS with its NKey; the HTTP and Kubernetes
APIs take bearer tokens. 'creds token' signs one with the credential's key,
valid for --ttl (at most 1h), and prints it as an ExecCredential, so that a
kubeconfig user runs it on demand:

  users:
  - name: widgets
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1
        command: jetplane
        args: [creds, token, /path/to/widgets.creds]
        interactiveMode: Never

It reads, and records the status of its kinds' objects (the status
subresource), nothing else. Revoking the credential revokes its tokens.`,
		Example: `  jetplane creds token widgets.creds
  jetplane creds token --plain --ttl 5m widgets.creds`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			tok, exp, err := auth.SignToken(data, ttl, time.Now())
			if err != nil {
				return err
			}
			if plain {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
				"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
				"status": map[string]any{"token": tok, "expirationTimestamp": exp.UTC().Format(time.RFC3339)},
			})
		},
	}
	token.Flags().DurationVar(&ttl, "ttl", 15*time.Minute, "how long the token is good for (at most 1h)")
	token.Flags().BoolVar(&plain, "plain", false, "print the token alone, not an ExecCredential")
	cmd.AddCommand(create, ls, revoke, token)
	return cmd
}

// waitLoaded returns once a running server has loaded the store's change,
// so that a credential works (or is refused) when the command returns; it
// gives up after 3 s with a note, as when no server runs on the store.
func waitLoaded(cmd *cobra.Command, s *auth.Store) {
	deadline := time.Now().Add(3 * time.Second)
	for !s.Loaded() {
		if time.Now().After(deadline) {
			fmt.Fprintln(cmd.ErrOrStderr(), "note: no running jetplane serve has loaded the change yet; one loads it when it starts or within a second")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
