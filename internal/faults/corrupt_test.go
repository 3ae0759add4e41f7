package faults_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/chain"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/events/integrity/integritytest"
	"github.com/jetplane/jetplane/internal/app"
)

var corruptAll = flag.Bool("faults.corrupt", false, "run every case of the corruption suite at several offsets (scripts/faults corrupt); without it, one offset of each")

// The corruption suite's log: events enough for three block files, one
// sealed Secret, a snapshot and a signed checkpoint, as a stopped
// instance leaves them.
const (
	corruptEvents = 2600
	corruptPad    = 8 << 10
)

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// logBuffer collects an app's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runApp starts jetplane on dir in this process; stop stops it and waits.
func runApp(t *testing.T, dir string) (a *app.App, logs *logBuffer, stop func(), err error) {
	t.Helper()
	logs = &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	a, err = app.New(ctx, app.Config{DataDir: dir, Listen: "127.0.0.1:0", NATSPort: -1,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs), nil))})
	if err != nil {
		cancel()
		return nil, logs, func() {}, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return a, logs, stop, nil
}

func appReadyz(t *testing.T, a *app.App) (int, string) {
	t.Helper()
	resp, err := http.Get(a.URL() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitReady(t *testing.T, a *app.App) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := appReadyz(t, a)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// template builds the suite's log once.
func template(t *testing.T) string {
	t.Helper()
	templateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jetplane-corrupt-")
		if err != nil {
			templateErr = err
			return
		}
		templateDir = dir
		integritytest.FillPadded(t, dir, 0, corruptEvents, corruptPad)
		a, _, stop, err := runApp(t, dir)
		if err != nil {
			templateErr = err
			return
		}
		waitReady(t, a)
		c := &api.Client{BaseURL: a.URL()}
		if _, err := c.Apply(context.Background(), "s.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: audit}\nstringData: {password: hunter2}\n"), ""); err != nil {
			templateErr = err
			return
		}
		stop() // the final snapshot and checkpoint
	})
	if templateErr != nil {
		t.Fatal(templateErr)
	}
	return templateDir
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
	os.Exit(code)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, fi.Mode().Perm()|0o700)
		}
		if !fi.Mode().IsRegular() || fi.Name() == "LOCK" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func blocks(t *testing.T, dir string) []chain.Block {
	t.Helper()
	s, err := chain.Open(dir, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// corruption is one way to damage a stopped instance's files.
type corruption struct {
	name string
	// damage changes dir; it returns the block file named in the report
	// ("" when none must be).
	damage func(t *testing.T, dir string) string
	// whole: the log stays whole (a snapshot or key case).
	whole bool
	// refused: the start itself must fail with this in the error.
	refused string
}

func pick(t *testing.T, dir string, which int) chain.Block {
	bs := blocks(t, dir)
	if len(bs) < 3 {
		t.Fatalf("the suite's log has %d block files; want at least 3", len(bs))
	}
	switch which {
	case 0:
		return bs[0]
	case 1:
		return bs[len(bs)/2]
	default:
		return bs[len(bs)-1]
	}
}

func size(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

var where = []string{"first block", "middle block", "last block"}

func corruptions() []corruption {
	var out []corruption
	fractions := []float64{0.5, 0.1, 0.9}
	for w := range 3 {
		for fi, frac := range fractions {
			if !*corruptAll && fi != w {
				continue // the short suite: one offset per block
			}
			kinds := []corruption{
				corruption{name: fmt.Sprintf("truncated/%s/at %.0f%%", where[w], frac*100), damage: func(t *testing.T, dir string) string {
					b := pick(t, dir, w)
					if err := os.Truncate(b.Path, int64(float64(size(t, b.Path))*frac)); err != nil {
						t.Fatal(err)
					}
					return b.Name()
				}},
				corruption{name: fmt.Sprintf("garbage/%s/at %.0f%%", where[w], frac*100), damage: func(t *testing.T, dir string) string {
					b := pick(t, dir, w)
					junk := make([]byte, 4096)
					r := rand.New(rand.NewPCG(uint64(w), uint64(fi)))
					for i := range junk {
						junk[i] = byte(r.Uint32())
					}
					off := min(int64(float64(size(t, b.Path))*frac), size(t, b.Path)-4096)
					overwrite(t, b.Path, off, junk)
					return b.Name()
				}},
				corruption{name: fmt.Sprintf("zeroed/%s/at %.0f%%", where[w], frac*100), damage: func(t *testing.T, dir string) string {
					b := pick(t, dir, w)
					overwrite(t, b.Path, int64(float64(size(t, b.Path))*frac), make([]byte, 64))
					return b.Name()
				}},
			}
			for k, c := range kinds {
				// The short suite: each kind of damage in one block.
				if *corruptAll || k == w {
					out = append(out, c)
				}
			}
		}
		if !*corruptAll && w != 0 {
			continue
		}
		out = append(out, corruption{name: "deleted block/" + where[w], damage: func(t *testing.T, dir string) string {
			b := pick(t, dir, w)
			if err := os.Remove(b.Path); err != nil {
				t.Fatal(err)
			}
			return b.Name()
		}})
	}
	if *corruptAll {
		out = append(out, corruption{name: "zeroed/first block/at offset 5000", damage: func(t *testing.T, dir string) string {
			b := pick(t, dir, 0)
			overwrite(t, b.Path, 5000, make([]byte, 64))
			return b.Name()
		}})
	}
	out = append(out,
		corruption{name: "snapshot deleted", whole: true, damage: func(t *testing.T, dir string) string {
			withBlobs(t, dir, func(ctx context.Context, b *events.Blobs, names []string) {
				for _, n := range names {
					if err := b.Delete(ctx, n); err != nil {
						t.Fatal(err)
					}
				}
			})
			return ""
		}},
		corruption{name: "snapshot replaced", whole: true, damage: func(t *testing.T, dir string) string {
			withBlobs(t, dir, func(ctx context.Context, b *events.Blobs, names []string) {
				for _, n := range names {
					// A well-formed snapshot of an empty state.
					if err := b.Put(ctx, n, nil); err != nil {
						t.Fatal(err)
					}
				}
			})
			return ""
		}},
		corruption{name: "key file deleted", refused: "encryption key file", damage: func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, "auth", "encryption.keys")); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
		corruption{name: "key file replaced by a new key", refused: "lacks key ids", damage: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "auth", "encryption.keys")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if _, err := seal.RotateKeyFile(path); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
		corruption{name: "key file with another key under the same id", refused: "holds other keys", damage: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "auth", "encryption.keys")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			id, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
			other := make([]byte, 32)
			other[0] = 1
			if err := os.WriteFile(path, []byte(id+" "+base64.StdEncoding.EncodeToString(other)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
	)
	return out
}

// withBlobs runs f on the snapshot store of the stopped instance at dir.
func withBlobs(t *testing.T, dir string, f func(ctx context.Context, b *events.Blobs, names []string)) {
	t.Helper()
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("corrupt")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Blobs(ctx, events.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	names, err := b.List(ctx, "")
	if err != nil || len(names) == 0 {
		t.Fatalf("snapshots: %v %v", names, err)
	}
	f(ctx, b, names)
}

// TestCorruption damages copies of a stopped instance's data directory in
// every way the suite knows and starts jetplane on each: the damage is
// found before any write is taken, named with sequences and files, the
// damaged files are kept aside, and every event is either still readable
// or inside a range the report names.
func TestCorruption(t *testing.T) {
	tmpl := template(t)
	for _, c := range corruptions() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, tmpl, dir)
			file := c.damage(t, dir)
			began := time.Now()
			a, logs, stop, err := runApp(t, dir)
			t.Logf("started in %s", time.Since(began).Round(time.Millisecond))
			if c.refused != "" {
				if err == nil {
					t.Fatalf("serve started; want it refused with %q", c.refused)
				}
				if !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "key ids") {
					t.Fatalf("serve refused with %v; want %q and the key ids", err, c.refused)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			cl := &api.Client{BaseURL: a.URL()}
			if c.whole {
				waitReady(t, a)
				if n := a.Store().Len(); n != corruptEvents+1 {
					t.Fatalf("%d objects after the start; want %d (rebuilt from the log)", n, corruptEvents+1)
				}
				if !strings.Contains(logs.String(), "snapshot") {
					t.Fatalf("nothing logged about the snapshot:\n%s", logs.String())
				}
				return
			}
			// The very first write is refused, naming the damage.
			_, applyErr := cl.Apply(context.Background(), "x.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after, namespace: audit}\ndata: {a: b}\n"), "")
			var se *api.APIError
			if !errors.As(applyErr, &se) || se.Code != http.StatusServiceUnavailable || !strings.Contains(applyErr.Error(), "damaged") {
				t.Fatalf("first apply on a damaged log: %v; want 503 naming the damage", applyErr)
			}
			code, body := appReadyz(t, a)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "sequence") || !strings.Contains(body, file) || !strings.Contains(body, "restore") {
				t.Fatalf("readyz %d %q; want 503 naming sequences, %s and the fix", code, body, file)
			}
			t.Logf("readyz after %s: %s", time.Since(began).Round(time.Millisecond), strings.TrimSpace(body))
			if !strings.Contains(logs.String(), "the log is damaged") {
				t.Fatal("the log names no damage")
			}
			stopping := time.Now()
			stop()
			t.Logf("stopped in %s", time.Since(stopping).Round(time.Millisecond))
			// Nothing silently lost: every sequence is readable in the
			// copy kept aside, or inside a range the report names.
			accounted(t, dir, body)
		})
	}
}

// accounted checks that every sequence 1..corruptEvents+1 is either in
// the damaged files kept aside or inside a range readyz named.
func accounted(t *testing.T, dir, report string) {
	t.Helper()
	asides, _ := filepath.Glob(filepath.Join(dir, "integrity", "damaged-*", "msgs"))
	if len(asides) != 1 {
		t.Fatalf("damaged files kept aside: %v; want one copy", asides)
	}
	seen := map[uint64]bool{}
	s := &chain.Store{Dir: asides[0], Stream: events.StreamName}
	bs, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		buf, err := os.ReadFile(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _ = s.Records(b, buf, 0, func(e chain.Event, _ int64) error { seen[e.Seq] = true; return nil })
	}
	named := func(seq uint64) bool {
		for _, f := range strings.Split(report, "; ") {
			var a, b uint64
			if n, _ := fmt.Sscanf(f[strings.Index(f, "sequence")+1:], "equences %d-%d", &a, &b); n == 2 && seq >= a && seq <= b {
				return true
			}
			if n, _ := fmt.Sscanf(f[strings.Index(f, "sequence")+1:], "equence %d", &a); n == 1 && seq == a {
				return true
			}
		}
		return false
	}
	for seq := uint64(1); seq <= corruptEvents+1; seq++ {
		if !seen[seq] && !named(seq) {
			t.Fatalf("sequence %d is neither readable nor named in %q", seq, report)
		}
	}
}
