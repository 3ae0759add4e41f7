package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/events/integrity"
)

// backup writes an online backup of the log and the chart store to w; the
// log carries its chain head, read from this instance's files.
func (a *App) backup(ctx context.Context, w io.Writer) error {
	var headAt events.HeadAt
	if a.monitor != nil {
		headAt = a.headAt
	}
	return events.BackupWithHead(ctx, a.nc, w, headAt)
}

// headAt is the chain head after seq, from the stored files.
func (a *App) headAt(seq uint64) (*events.ChainHead, error) {
	store, err := integrity.OpenStore(a.cfg.DataDir, events.StreamName)
	if err != nil || store == nil {
		return nil, err
	}
	r, err := integrity.Verify(store, events.StreamName, a.keeper.All(), integrity.VerifyOptions{Running: true, HeadAt: seq})
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("no backup of a damaged log: %w", err)
	}
	if r.HeadAt == nil {
		// A cluster node whose copy lags the leader's snapshot.
		a.cfg.Logger.Warn("backup: this node's files do not reach the backup's last sequence; the backup carries no chain head", "seq", seq, "local_last", r.Last)
		return nil, nil
	}
	return &events.ChainHead{Seq: seq, Head: r.HeadAt.String()}, nil
}

// Restore reads a backup (GET /v1/backup, `jetplane backup`) into the
// embedded NATS store at dataDir, which must hold no log yet; or, with
// nats.URLs set, into that outside NATS deployment. A backup that carries
// its chain head is checked against it: restored events that do not hash
// to it are removed again and the restore fails. The restored instance
// signs the head as its first checkpoint, so `jetplane verify` of it
// shows the backup's head. jetplane started on it afterwards has the
// state and history the backup was taken with.
func Restore(ctx context.Context, dataDir string, nats events.ConnectOptions, r io.Reader) error {
	_, err := RestoreVerified(ctx, dataDir, nats, r)
	return err
}

// RestoreVerified is Restore returning the chain head it checked (nil
// when the backup carries none or the restore is into an outside NATS).
func RestoreVerified(ctx context.Context, dataDir string, nats events.ConnectOptions, r io.Reader) (*events.ChainHead, error) {
	if nats.URLs != "" {
		nc, err := events.Connect(nats)
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		return events.RestoreWithHead(ctx, nc, r)
	}
	if dataDir == "" {
		return nil, fmt.Errorf("restore: give the data directory to restore into, or an outside NATS")
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dataDir, Port: -1})
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect("jetplane-restore")
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	head, err := events.RestoreWithHead(ctx, nc, r)
	nc.Close()
	srv.Shutdown()
	if err != nil || head == nil {
		return head, err
	}
	if err := checkRestored(dataDir, head); err != nil {
		// Nothing of a backup that fails its own head stays.
		_ = os.RemoveAll(filepath.Join(dataDir, "jetstream"))
		return nil, err
	}
	return head, nil
}

// checkRestored walks the restored log and signs its head when it is the
// head the backup carries.
func checkRestored(dataDir string, want *events.ChainHead) error {
	store, err := integrity.OpenStore(dataDir, events.StreamName)
	if err != nil {
		return err
	}
	if store == nil {
		return errors.New("restore: the restored log has no files")
	}
	rep, err := integrity.Verify(store, events.StreamName, nil, integrity.VerifyOptions{HeadAt: want.Seq})
	if err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("restore: the restored log is damaged, nothing was kept: %w", err)
	}
	if rep.HeadAt == nil || rep.HeadAt.String() != want.Head {
		got := "nothing"
		if rep.HeadAt != nil {
			got = rep.HeadAt.String()
		}
		return fmt.Errorf("restore: the backup's events hash to %s at sequence %d, but the backup carries head %s: it was changed or damaged; nothing was kept", got, want.Seq, want.Head)
	}
	dir := filepath.Join(dataDir, "integrity")
	if _, err := os.Stat(filepath.Join(dir, integrity.CheckpointsFile)); err == nil {
		// The checkpoints of the log this one replaces.
		old := filepath.Join(dir, integrity.CheckpointsFile+".before-restore-"+time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(filepath.Join(dir, integrity.CheckpointsFile), old); err != nil {
			return err
		}
	}
	k, err := integrity.OpenKeeper(dir, events.StreamName)
	if err != nil {
		return err
	}
	_, err = k.Add(want.Seq, *rep.HeadAt, time.Now(), 0)
	return err
}
