package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/integrity"
)

// checkLog holds the stored log to its signed checkpoints before the
// embedded server loads it: the server would cut a damaged block short
// or skip it without a word. On damage the files are copied aside first
// (the server's repair would erase the evidence) and the instance comes
// up refusing writes, with the damage in /readyz and the log; a cluster
// node instead moves its store aside and takes the log again from its
// peers.
func (a *App) checkLog() error {
	cfg := a.cfg
	// Sealed Secrets need the key file they were sealed under: never a
	// new one made in its place.
	keyPath := cfg.EncryptionKeyFile
	if keyPath == "" {
		authDir := cfg.NATSAuthDir
		if authDir == "" {
			authDir = filepath.Join(cfg.DataDir, "auth")
		}
		keyPath = filepath.Join(authDir, "encryption.keys")
	}
	needed, err := sealedUnder(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("integrity: reading the data keys: %w", err)
	}
	if err := checkKeyFile(keyPath, needed); err != nil {
		return err
	}
	dir := filepath.Join(cfg.DataDir, "integrity")
	keeper, err := integrity.OpenKeeper(dir, events.StreamName)
	if err != nil {
		return err
	}
	store, err := integrity.OpenStore(cfg.DataDir, events.StreamName)
	if err != nil {
		return err
	}
	rep, err := integrity.Verify(store, events.StreamName, keeper.All(), integrity.VerifyOptions{})
	if err != nil {
		return fmt.Errorf("integrity: %w", err)
	}
	clustered := cfg.NATSCluster.Name != ""
	fix := "restore the last backup into an empty data directory (jetplane restore FILE --data NEWDIR) and serve on it"
	if !rep.OK() {
		aside := filepath.Join(dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z"))
		if clustered {
			// The other nodes hold the log: this node's copy goes aside
			// whole and the node joins again as a new replica.
			if err := os.MkdirAll(aside, 0o700); err != nil {
				return err
			}
			if err := os.Rename(filepath.Join(cfg.DataDir, "jetstream"), filepath.Join(aside, "jetstream")); err != nil {
				return fmt.Errorf("integrity: moving the damaged store aside: %w", err)
			}
			integrity.LogReport(cfg.Logger, rep, "this node moved its store aside to "+aside+" and takes the log again from its peers")
			a.resync = rep.Checkpoint
			rep, store = integrity.Report{Stream: events.StreamName}, nil
		} else {
			if err := copyDir(store.Dir, filepath.Join(aside, "msgs")); err != nil {
				return fmt.Errorf("integrity: copying the damaged files aside: %w", err)
			}
			fix += "; the damaged files were copied to " + aside
			integrity.LogReport(cfg.Logger, rep, fix)
		}
	} else if rep.Checkpoint != nil {
		cfg.Logger.Info("the log matches its checkpoints", "events", rep.Events, "last_seq", rep.Last, "head", rep.Head.String(), "took", rep.Elapsed.Round(time.Millisecond))
	} else if rep.Events > 0 {
		cfg.Logger.Info("the log reads whole; no checkpoint yet, its head is signed from now on", "events", rep.Events, "last_seq", rep.Last, "head", rep.Head.String(), "took", rep.Elapsed.Round(time.Millisecond))
	}
	if clustered {
		fix = "stop this node, move " + filepath.Join(cfg.DataDir, "jetstream") + " aside and start it again: it takes the log from its peers"
	}
	a.keeper = keeper
	a.monitor = integrity.NewMonitor(integrity.MonitorConfig{
		StoreDir: cfg.DataDir, Stream: events.StreamName, Keeper: keeper, Logger: cfg.Logger, Fix: fix,
	}, rep)
	return nil
}

// integrityErr is nil while the log is whole and caught up with what this
// instance last signed; otherwise why writes are refused.
func (a *App) integrityErr() error {
	if a.monitor == nil {
		return nil
	}
	if err := a.monitor.Damage(); err != nil {
		return err
	}
	a.resyncMu.Lock()
	defer a.resyncMu.Unlock()
	if cp := a.resync; cp != nil {
		seq, _ := a.monitor.Head()
		if seq < cp.Seq {
			return fmt.Errorf("this node is taking the log again from its peers: at sequence %d of %d", seq, cp.Seq)
		}
		// Caught up: the log it took must reproduce what it had signed.
		if r := a.monitor.Full(); !r.OK() {
			return a.monitor.Damage()
		}
		a.resync = nil
		// Its state must hold all of it too before it answers: the
		// projection folds what the node took while the node takes it,
		// and may trail the log's end.
		a.foldTo = seq
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if last, err := a.log.LastSequence(ctx); err == nil {
			a.foldTo = max(a.foldTo, last)
		}
		cancel()
		a.cfg.Logger.Info("this node holds the log again, as it had signed it", "seq", seq, "fold_to", a.foldTo)
	}
	return nil
}

// restoredFolded is nil unless this node took the log again from its
// peers and its projection has not yet folded the log's end as it stood
// when the node held it again: a read right after readiness finds every
// object.
func (a *App) restoredFolded() error {
	a.resyncMu.Lock()
	defer a.resyncMu.Unlock()
	if a.foldTo == 0 {
		return nil
	}
	if at := a.store.Seq(); at < a.foldTo {
		return fmt.Errorf("the projection is folding the log this node took again from its peers: at sequence %d of %d", at, a.foldTo)
	}
	a.foldTo = 0
	return nil
}

// runIntegrity runs the running check until ctx ends.
func (a *App) runIntegrity(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	if a.monitor == nil {
		done <- nil
		return done
	}
	go func() { done <- a.monitor.Start(ctx) }()
	return done
}

// integrityAPI answers GET /v1/verify and /v1/checkpoints.
type integrityAPI struct{ a *App }

func (i integrityAPI) Verify(_ context.Context, from uint64) (integrity.Report, error) {
	a := i.a
	store, err := integrity.OpenStore(a.cfg.DataDir, events.StreamName)
	if err != nil {
		return integrity.Report{}, err
	}
	o := integrity.VerifyOptions{From: from, Running: true}
	if seq, head := a.monitor.Head(); seq > 0 {
		o.Live = &integrity.Checkpoint{Stream: events.StreamName, Seq: seq, Head: head.String(), Time: time.Now()}
	}
	return integrity.Verify(store, events.StreamName, a.keeper.All(), o)
}

func (i integrityAPI) Checkpoints() ([]integrity.Checkpoint, string) {
	k := i.a.keeper
	cps := k.All()
	key := ""
	if len(cps) > 0 {
		key = cps[0].Key
	}
	return cps, key
}

// copyDir copies the regular files of src into dst (created).
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

// integrityAPI is nil without a chain (an outside NATS).
func (a *App) integrityAPI() api.Integrity {
	if a.monitor == nil {
		return nil
	}
	return integrityAPI{a}
}
