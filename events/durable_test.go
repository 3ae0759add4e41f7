package events_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/embedded"
	"github.com/jetplane/jetplane/internal/testenv"
)

// gatedSync is a Config.Sync that counts its calls and holds each until
// released, so a test sees who waits for which.
type gatedSync struct {
	calls   atomic.Int64
	started chan struct{}
	release chan error
}

func newGatedSync() *gatedSync {
	return &gatedSync{started: make(chan struct{}, 100), release: make(chan error, 100)}
}

// await returns once an fsync has started, and fails the test if none
// does: an append that returned without one never starts it.
func (g *gatedSync) await(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync started within 10s")
	}
}

func (g *gatedSync) sync(string, bool) error {
	g.calls.Add(1)
	g.started <- struct{}{}
	return <-g.release
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With the log doing its own fsyncs (decision 0083), no append of any
// form returns before an fsync that began after the server acknowledged
// it; appends that arrive while one fsync runs share the next; a failed
// fsync fails the appends it was to cover and every one after it.
func TestLogSyncCoversEveryAppendAndSharesFsyncs(t *testing.T) {
	g := newGatedSync()
	l := testenv.Log(t, events.Config{Sync: g.sync, AtomicGroups: true})
	ctx := context.Background()

	forms := []struct {
		name   string
		append func(i int) error
	}{
		{"Append", func(i int) error {
			_, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("a-", i)), ""), Expect: 0})
			return err
		}},
		{"AppendBatch", func(i int) error {
			_, err := l.AppendBatch(ctx, []events.Entry{
				{Event: event(key(fmt.Sprint("b-", i, "-1")), ""), Expect: 0},
				{Event: event(key(fmt.Sprint("b-", i, "-2")), ""), Expect: 0},
			})
			return err
		}},
		{"AppendAsync", func(i int) error {
			_, errs := l.AppendAsync(ctx, []events.Entry{
				{Event: event(key(fmt.Sprint("c-", i, "-1")), ""), Expect: 0},
				{Event: event(key(fmt.Sprint("c-", i, "-2")), ""), Expect: 0},
			})
			return errors.Join(errs...)
		}},
		{"AppendEach", func(i int) error {
			_, errs := l.AppendEach(ctx, []events.Entry{{Event: event(key(fmt.Sprint("d-", i)), ""), Expect: 0}})
			return errors.Join(errs...)
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			calls0, _ := l.Syncs()
			// One append: it waits for the fsync it started.
			done := make(chan error, 1)
			go func() { done <- f.append(0) }()
			g.await(t)
			select {
			case err := <-done:
				t.Fatalf("returned (%v) while its fsync had not ended", err)
			default:
			}
			// While that fsync runs, more appends arrive: none returns
			// before the next fsync, and one covers them all.
			const n = 10
			_, w0 := l.Syncs()
			more := make(chan error, n)
			for i := range n {
				go func() { more <- f.append(i + 1) }()
			}
			waitFor(t, "the appends to wait for an fsync", func() bool {
				_, w := l.Syncs()
				return w-w0 >= n
			})
			select {
			case err := <-more:
				t.Fatalf("an append returned (%v) before any fsync after it", err)
			default:
			}
			g.release <- nil
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			g.await(t)
			g.release <- nil
			for range n {
				if err := <-more; err != nil {
					t.Fatal(err)
				}
			}
			if calls, _ := l.Syncs(); calls-calls0 != 2 {
				t.Fatalf("%d fsyncs for 1 then %d appends, want 2", calls-calls0, n)
			}
		})
	}

	t.Run("failed fsync", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- forms[0].append(100) }()
		g.await(t)
		g.release <- errors.New("input/output error")
		if err := <-done; !errors.Is(err, events.ErrStorageUnavailable) {
			t.Fatalf("append covered by a failed fsync: %v, want ErrStorageUnavailable", err)
		}
		// A failed fsync is final: the kernel may have dropped the pages
		// it could not write, so no later fsync vouches for them. The
		// next append fails too, without an fsync that would say so.
		if err := forms[0].append(101); !errors.Is(err, events.ErrStorageUnavailable) {
			t.Fatalf("append after a failed fsync: %v, want ErrStorageUnavailable", err)
		}
	})
}

// The embedded server's SyncStream finds the log's blocks and fsyncs them
// as the log writes; a stream it cannot find is an error, not a silent
// success.
func TestEmbeddedSyncStream(t *testing.T) {
	srv, nc := testenv.NATSWith(t, embedded.Config{StoreDir: t.TempDir()})
	if err := srv.SyncStream("NO_SUCH_STREAM", false); err == nil {
		t.Fatal("SyncStream of a stream that does not exist succeeded")
	}
	l, err := events.Open(context.Background(), nc, events.Config{Sync: srv.SyncStream})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k-", i)), ""), Expect: 0})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	syncs, waits := l.Syncs()
	if syncs == 0 || waits != 64 {
		t.Fatalf("%d fsyncs for %d waits, want some for 64", syncs, waits)
	}
	if n, err := l.Count(ctx); err != nil || n != 64 {
		t.Fatalf("log holds %d events (%v), want 64", n, err)
	}
}

// The data keys, blobs and images the log opens are made durable after
// each write as the log's events are: a data key must last as long as
// the events it sealed, and an erased one must stay erased. Run against
// the embedded server's SyncStream, so the streams' names are the ones
// it finds on disk.
func TestLogSyncCoversKeysBlobsAndImages(t *testing.T) {
	srv, nc := testenv.NATSWith(t, embedded.Config{StoreDir: t.TempDir()})
	var mu sync.Mutex
	var calls []string
	l, err := events.Open(context.Background(), nc, events.Config{Sync: func(stream string, every bool) error {
		mu.Lock()
		calls = append(calls, fmt.Sprint(stream, " ", every))
		mu.Unlock()
		return srv.SyncStream(stream, every)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	synced := func(want string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			if c == want {
				calls = nil
				return
			}
		}
		t.Fatalf("no sync %q among %q", want, calls)
	}
	keys, err := l.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, "ns.k1", []byte("wrapped")); err != nil {
		t.Fatal(err)
	}
	synced("KV_" + events.KeysBucket + " false")
	if n, err := keys.Destroy(ctx, "ns"); err != nil || n != 1 {
		t.Fatalf("destroyed %d (%v), want 1", n, err)
	}
	synced("KV_" + events.KeysBucket + " true")
	blobs, err := l.Blobs(ctx, "JP_TEST")
	if err != nil {
		t.Fatal(err)
	}
	if err := blobs.Put(ctx, "b", []byte("data")); err != nil {
		t.Fatal(err)
	}
	synced("OBJ_JP_TEST false")
	images, err := l.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Push(ctx, "mod:v1", strings.NewReader("\x00asm\x01\x00\x00\x00"), 1<<20); err != nil {
		t.Fatal(err)
	}
	synced("OBJ_" + events.ImagesBucket + " false")
}

// SyncStream goes on across new blocks: with a small stream (32 kB
// blocks) the log's writes fill several, and every append still waits
// for an fsync that succeeds.
func TestEmbeddedSyncStreamAcrossBlocks(t *testing.T) {
	dir := t.TempDir()
	srv, nc := testenv.NATSWith(t, embedded.Config{StoreDir: dir})
	l, err := events.Open(context.Background(), nc, events.Config{MaxBytes: 120_000, Sync: srv.SyncStream})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 40 {
		entries := make([]events.Entry, 5)
		for j := range entries {
			ev := event(key(fmt.Sprint("k-", i, "-", j)), "")
			ev.Actor = "user/" + strings.Repeat("x", 1000)
			entries[j] = events.Entry{Event: ev, Expect: events.AnyVersion}
		}
		if _, errs := l.AppendAsync(ctx, entries); errs != nil {
			t.Fatal(errors.Join(errs...))
		}
	}
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", events.StreamName, "msgs", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	newest := 0
	for _, b := range blocks {
		var i int
		if _, err := fmt.Sscanf(filepath.Base(b), "%d.blk", &i); err == nil {
			newest = max(newest, i)
		}
	}
	if newest < 3 {
		t.Fatalf("newest block %d; the test meant to fill several (blocks %q)", newest, blocks)
	}
	if syncs, waits := l.Syncs(); syncs == 0 || waits != 40 {
		t.Fatalf("%d fsyncs for %d waits, want some for 40", syncs, waits)
	}
}
