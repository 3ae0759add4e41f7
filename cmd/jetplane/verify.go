package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/integrity"
)

func newVerify(g *globals) *cobra.Command {
	var dataDir string
	var from uint64
	cmd := &cobra.Command{
		Use:   "verify [--data DIR] [--from SEQ]",
		Short: "Prove the log is the log that was written: recompute its hash chain and check it against the signed checkpoints",
		Long: `Recompute the SHA-256 chain over every stored event (the algorithm is in the
README, "The record and how to verify it") and hold it to the checkpoints the
instance signed: a missing, unreadable, changed or reordered event, or a log
shorter than the instance once held, is a break. Prints the first break and
exits 1; exits 0 on a whole log.

Without --data, the running server verifies its own files (GET /v1/verify).
With --data, a stopped instance's data directory is read directly (nothing
is written). --from SEQ starts at the last checkpoint before SEQ.`,
		Example: `  jetplane verify
  jetplane verify --data /var/lib/jetplane
  jetplane verify --from 1200000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep integrity.Report
			if dataDir != "" {
				cps, err := integrity.LoadCheckpoints(filepath.Join(dataDir, "integrity"))
				if err != nil {
					return err
				}
				store, err := integrity.OpenStore(dataDir, events.StreamName)
				if err != nil {
					return err
				}
				if rep, err = integrity.Verify(store, events.StreamName, cps, integrity.VerifyOptions{From: from}); err != nil {
					return err
				}
			} else {
				resp, err := g.client().Verify(cmd.Context(), from)
				if err != nil {
					return err
				}
				rep = resp.Report
			}
			return printVerify(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "verify a stopped instance's data directory instead of asking the server")
	f.Uint64Var(&from, "from", 0, "verify from this sequence on (from the last checkpoint before it)")
	return cmd
}

func printVerify(w io.Writer, r integrity.Report) error {
	rate := 0.0
	if s := r.Elapsed.Seconds(); s > 0 {
		rate = float64(r.Events) / s
	}
	cp := "no checkpoint yet"
	if r.Checkpoint != nil {
		cp = fmt.Sprintf("%d checkpoints matched, the last of sequence %d signed %s", r.Matched, r.Checkpoint.Seq, r.Checkpoint.Time.Format("2006-01-02T15:04:05Z07:00"))
	}
	if r.OK() {
		fmt.Fprintf(w, "ok: sequences %d-%d (%d events), head %s; %s; %.0f events/s\n", r.From, r.Last, r.Events, r.Head, cp, rate)
		return nil
	}
	fmt.Fprintf(w, "broken: %s\n", r.Breaks[0].Error())
	if n := len(r.Breaks); n > 1 {
		fmt.Fprintf(w, "and %d more breaks after it\n", n-1)
	}
	fmt.Fprintf(w, "read sequences %d-%d (%d events); %s\n", r.From, r.Last, r.Events, cp)
	return codeError{code: exitError, err: errors.New("the log is not the log that was written; restore the last backup (jetplane restore), or on a cluster let the damaged node take the log from its peers")}
}
