package security

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/projections"
)

const wait = 30 * time.Second

// start runs jetplane on dir (a new temporary one when empty) with the
// embedded NATS on a free port, and returns it once ready; it stops when
// the test ends.
func start(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	a, stop := run(t, cfg)
	t.Cleanup(stop)
	return a
}

// run is start with a stop function, for tests that stop it earlier.
func run(t *testing.T, cfg app.Config) (*app.App, func()) {
	t.Helper()
	cfg.NATSPort = -1
	cfg.Listen = "127.0.0.1:0"
	cfg.Log.Partitions = 4
	return apptest.Start(t, cfg, wait)
}

// seed applies a few objects so the log and state are not empty.
func seed(t *testing.T, c *api.Client) {
	t.Helper()
	doc := `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop}
data: {color: blue}
`
	if _, err := c.Apply(context.Background(), "seed.yaml", []byte(doc), ""); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// fingerprint is what an attack must not change: the log's last sequence
// and a digest of the whole current state.
type fingerprint struct {
	LastSeq uint64
	Digest  string
}

func fingerprintOf(t *testing.T, a *app.App) fingerprint {
	t.Helper()
	last, err := a.Log().LastSequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The projection must have folded everything the log holds.
	deadline := time.Now().Add(wait)
	for a.Store().Seq() < last {
		if time.Now().After(deadline) {
			t.Fatalf("projection at %d, log at %d", a.Store().Seq(), last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	objs, _ := a.Store().List(projections.Query{}) // ordered by key
	h := sha256.New()
	for _, o := range objs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return fingerprint{LastSeq: last, Digest: hex.EncodeToString(h.Sum(nil))}
}

// unchanged fails the test when the log or state moved since before.
func unchanged(t *testing.T, a *app.App, before fingerprint) {
	t.Helper()
	after := fingerprintOf(t, a)
	if after == before {
		return
	}
	// Name what was written, so a failure says which writer moved it.
	var written []string
	if after.LastSeq > before.LastSeq {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = a.Log().Read(ctx, events.ReadOptions{From: before.LastSeq + 1}, func(m events.Message) error {
			written = append(written, fmt.Sprintf("%d %s", m.Sequence, m.Subject))
			return nil
		})
	}
	t.Fatalf("the log changed: before %+v, after %+v; written since: %v", before, after, written)
}

// violations records the permission violations a connection is told of.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

// waitFor waits until the server has reported a permission violation
// naming subject.
func (v *violations) waitFor(t *testing.T, subject string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
				v.mu.Unlock()
				return
			}
		}
		seen := slices.Clone(v.errs)
		v.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no permissions violation for %s; saw %q", subject, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// credFile creates the credential role name (a controller's of kinds) on
// a's store and writes its file, as `jetplane creds create -o` does.
func credFile(t *testing.T, a *app.App, role auth.Role, name string, kinds ...string) string {
	t.Helper()
	data, err := a.Creds().CreateWithKinds(role, name, kinds)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// connectAs creates a credential of role and name on a's store, writes it
// to a file and connects with it.
func connectAs(t *testing.T, a *app.App, role auth.Role, name string) (*nats.Conn, *violations) {
	t.Helper()
	return connectWith(t, a.NATSURL(), credFile(t, a, role, name))
}

func connectWith(t *testing.T, url, creds string) (*nats.Conn, *violations) {
	t.Helper()
	opts, err := events.CredsOptions(creds)
	if err != nil {
		t.Fatal(err)
	}
	v := &violations{}
	// The server picks up a new credential within half a second.
	deadline := time.Now().Add(wait)
	for {
		nc, err := nats.Connect(url, append(opts, nats.ErrorHandler(v.handler), nats.Timeout(2*time.Second))...)
		if err == nil {
			t.Cleanup(nc.Close)
			return nc, v
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect with %s: %v", creds, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
