package security

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// openServer runs a NATS server without authentication on dir, as
// jetplane's embedded server ran before credentials existed.
func openServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true,
		MaxPayload: 4 << 20, JetStreamMaxMemory: -1, JetStreamMaxStore: -1, ServerName: "jetplane",
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(wait) {
		t.Fatal("server not ready")
	}
	return ns
}

// A data directory written before credentials existed starts under this
// version: it gets credentials, keeps every event and the same state, and
// from then on refuses clients without credentials.
func TestUpgradeFromDataDirWithoutCredentials(t *testing.T) {
	dir := t.TempDir()
	old := openServer(t, dir)
	// jetplane on that server, writing through its real API.
	a, stop := run(t, app.Config{NATS: events.ConnectOptions{URLs: old.ClientURL()}})
	c := &api.Client{BaseURL: a.URL()}
	seed(t, c)
	if _, err := c.Delete(context.Background(), api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	before := fingerprintOf(t, a)
	stop()
	old.Shutdown()
	old.WaitForShutdown()
	if _, err := os.Stat(filepath.Join(dir, "auth")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old version's directory already has credentials: %v", err)
	}

	a = start(t, app.Config{DataDir: dir})
	if after := fingerprintOf(t, a); after != before {
		t.Fatalf("after the upgrade the log is %+v, before it was %+v", after, before)
	}
	fi, err := os.Stat(filepath.Join(dir, "auth", auth.InstanceFile))
	if err != nil {
		t.Fatalf("no instance credential: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("instance credential has mode %v, want 0600", fi.Mode().Perm())
	}
	if nc, err := nats.Connect(a.NATSURL(), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("the upgraded server admits clients without credentials")
	}
}

// On an outside NATS, jetplane refuses a log stream that lets anyone
// delete or purge events, and leaves it as it found it.
func TestOutsideLogMustBeAppendOnly(t *testing.T) {
	ns := openServer(t, t.TempDir())
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamName, Subjects: []string{events.InputPrefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.InputPrefix+".ConfigMap.shop.web", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = app.New(ctx, app.Config{NATS: events.ConnectOptions{URLs: ns.ClientURL()}, Listen: "127.0.0.1:0"})
	if !errors.Is(err, events.ErrNotAppendOnly) {
		t.Fatalf("New = %v, want ErrNotAppendOnly", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.DenyDelete || info.State.Msgs != 1 {
		t.Fatalf("the stream was changed: deny_delete=%t, %d events", info.Config.DenyDelete, info.State.Msgs)
	}
}

// jetplane runs on an outside NATS whose user has exactly the documented
// permissions, and that user cannot remove events either.
func TestOutsideNATSWithDocumentedPermissions(t *testing.T) {
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{{Username: "jetplane", Password: "s3cret", Permissions: auth.OutsidePermissions()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(wait) {
		t.Fatal("server not ready")
	}
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://jetplane:s3cret@", 1)
	a := start(t, app.Config{NATS: events.ConnectOptions{URLs: url}, Principals: principals(), EncryptionKeyFile: keyFile(t)})
	c := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	seed(t, c)
	if _, err := c.Apply(context.Background(), "s.yaml", []byte(secretYAML("db", "pw")), ""); err != nil {
		t.Fatalf("apply a Secret: %v", err)
	}
	before := fingerprintOf(t, a)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), events.StreamName); err == nil {
		t.Fatal("deleted the log")
	}
	unchanged(t, a, before)
}

func keyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if _, err := seal.RotateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}
