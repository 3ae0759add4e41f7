package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
)

func newBackup(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE|-",
		Short: "Take an online backup of the log and the chart store",
		Long: `Write a consistent backup of the running jetplane's log (every event, with its
sequence) and its chart store to FILE (- for stdout), while it keeps serving.
Restore it with 'jetplane restore' into an empty data directory (or NATS
account); jetplane started there has the same state and history. Projection
snapshots are not included: they are rebuilt from the log. The backup
carries the log's chain head (see jetplane verify); restore checks every
restored event against it.`,
		Example: `  jetplane backup jetplane-$(date +%F).backup`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var w io.Writer = cmd.OutOrStdout()
			if args[0] != "-" {
				f, err := os.OpenFile(args[0], os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
				if err := g.client().Backup(cmd.Context(), w); err != nil {
					os.Remove(args[0])
					return err
				}
				if err := f.Sync(); err != nil {
					return err
				}
				fi, _ := f.Stat()
				fmt.Fprintf(cmd.ErrOrStderr(), "backup written to %s (%d bytes)\n", args[0], fi.Size())
				if _, err := f.Seek(0, io.SeekStart); err == nil {
					if h, err := events.BackupHead(f); err == nil && h != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "the log's chain head at sequence %d: %s\n", h.Seq, h.Head)
					}
				}
				return nil
			}
			return g.client().Backup(cmd.Context(), w)
		},
	}
}

func newRestore() *cobra.Command {
	var dataDir string
	var nats events.ConnectOptions
	cmd := &cobra.Command{
		Use:   "restore FILE|- --data DIR",
		Short: "Restore a backup into an empty data directory (jetplane not running on it)",
		Long: `Read a backup made by 'jetplane backup' into the embedded NATS store at --data,
which must hold no log yet; or with --nats-url into an outside NATS
deployment that has no jetplane streams. Then start 'jetplane serve' on it.`,
		Example: `  jetplane restore jetplane-2026-11-23.backup --data /var/lib/jetplane`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			head, err := app.RestoreVerified(cmd.Context(), dataDir, nats, r)
			if err != nil {
				return err
			}
			if head != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "the restored log hashes to the head the backup carries: %s at sequence %d\n", head.Head, head.Seq)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "restored; start jetplane serve on it")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "./data", "data directory of the embedded NATS server to restore into")
	f.StringVar(&nats.URLs, "nats-url", "", "restore into an outside NATS deployment instead")
	f.StringVar(&nats.CredsFile, "nats-creds", "", "NATS credentials file for --nats-url")
	f.StringVar(&nats.CAFile, "nats-ca", "", "CA certificate to trust for NATS TLS")
	f.StringVar(&nats.CertFile, "nats-cert", "", "client certificate for NATS TLS")
	f.StringVar(&nats.KeyFile, "nats-key", "", "client key for NATS TLS")
	return cmd
}
