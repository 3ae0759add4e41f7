package app

import (
	"context"
	"fmt"
	"io"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
)

// backup writes an online backup of the log and the chart store to w.
func (a *App) backup(ctx context.Context, w io.Writer) error {
	return events.Backup(ctx, a.nc, w)
}

// Restore reads a backup (GET /v1/backup, `jetplane backup`) into the
// embedded NATS store at dataDir, which must hold no log yet; or, with
// nats.URLs set, into that outside NATS deployment. jetplane started on
// it afterwards has the state and history the backup was taken with.
func Restore(ctx context.Context, dataDir string, nats events.ConnectOptions, r io.Reader) error {
	if nats.URLs != "" {
		nc, err := events.Connect(nats)
		if err != nil {
			return err
		}
		defer nc.Close()
		return events.Restore(ctx, nc, r)
	}
	if dataDir == "" {
		return fmt.Errorf("restore: give the data directory to restore into, or an outside NATS")
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dataDir, Port: -1})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("jetplane-restore")
	if err != nil {
		return err
	}
	defer nc.Close()
	return events.Restore(ctx, nc, r)
}
