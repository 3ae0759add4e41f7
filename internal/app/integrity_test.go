package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/internal/app"
)

// A backup carries the log's chain head; a restore checks the restored
// events against it and signs it, so the restored instance verifies with
// the same head; a backup whose head does not match is refused and
// leaves nothing behind.
func TestRestoreChecksChainHead(t *testing.T) {
	_, c := startApp(t, app.Config{})
	ctx := t.Context()
	for i := range 5 {
		applyYAML(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm"+string(rune('0'+i))+", namespace: shop}\ndata: {a: b}\n")
	}
	var backup bytes.Buffer
	if err := c.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	carried, err := events.BackupHead(bytes.NewReader(backup.Bytes()))
	if err != nil || carried == nil {
		t.Fatalf("the backup carries no chain head: %v", err)
	}
	live, err := c.Verify(ctx, 0)
	if err != nil || !live.OK {
		t.Fatalf("verify through the server: %+v %v", live, err)
	}

	dir := t.TempDir()
	head, err := app.RestoreVerified(ctx, dir, events.ConnectOptions{}, bytes.NewReader(backup.Bytes()))
	if err != nil || head == nil || *head != *carried {
		t.Fatalf("restore: head %v, %v; want %v", head, err, carried)
	}
	cps, err := integrity.LoadCheckpoints(filepath.Join(dir, "integrity"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := integrity.OpenStore(dir, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := integrity.Verify(store, events.StreamName, cps, integrity.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Matched != 1 || rep.Last != carried.Seq || rep.Head.String() != carried.Head {
		t.Fatalf("verify of the restored data: %+v %v; want head %s at %d", rep, err, carried.Head, carried.Seq)
	}
	b, _ := startApp(t, app.Config{DataDir: dir})
	if got := b.Store().Len(); got != 5 {
		t.Fatalf("restored instance holds %d objects, want 5", got)
	}

	// The same backup with another head: refused, nothing kept.
	forged := bytes.Replace(backup.Bytes(), []byte(carried.Head), []byte(strings.Repeat("0", len(carried.Head))), 1)
	dir2 := t.TempDir()
	if _, err := app.RestoreVerified(ctx, dir2, events.ConnectOptions{}, bytes.NewReader(forged)); err == nil || !strings.Contains(err.Error(), "nothing was kept") {
		t.Fatalf("restore of a backup with another head: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "jetstream")); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left the store behind: %v", err)
	}
}
