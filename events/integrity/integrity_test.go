package integrity_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/chain"
	"github.com/jetplane/jetplane/events/integrity"
	"github.com/jetplane/jetplane/events/integrity/integritytest"
)

// verify checks dir's log against its checkpoints.
func verify(t *testing.T, dir string) integrity.Report {
	t.Helper()
	k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := integrity.OpenStore(dir, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	r, err := integrity.Verify(s, events.StreamName, k.All(), integrity.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sealed writes a log of n events and signs its head, as a stopped
// instance leaves it.
func sealed(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	integritytest.Fill(t, dir, 0, n)
	r := verify(t, dir)
	if !r.OK() || r.Last != uint64(n) {
		t.Fatalf("fresh log: %+v", r)
	}
	k, err := integrity.OpenKeeper(filepath.Join(dir, "integrity"), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Add(r.Last, r.Head, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

func blockFile(t *testing.T, dir string) string {
	t.Helper()
	s, err := chain.Open(dir, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s.Blocks()
	if err != nil || len(bs) == 0 {
		t.Fatalf("blocks: %v %v", bs, err)
	}
	return bs[0].Path
}

func TestIntactLogVerifies(t *testing.T) {
	dir := sealed(t, 2000)
	r := verify(t, dir)
	if !r.OK() || r.Events != 2000 || r.Matched != 1 {
		t.Fatalf("report %+v", r)
	}
}

// Every single flipped bit among the stored events is found, and named
// with a sequence and the file.
func TestFlippedBitIsFound(t *testing.T) {
	dir := sealed(t, 500)
	path := blockFile(t, dir)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		off := rng.IntN(len(orig))
		bit := byte(1) << rng.IntN(8)
		b := append([]byte(nil), orig...)
		b[off] ^= bit
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := verify(t, dir)
		if r.OK() {
			t.Fatalf("case %d: bit %#x at offset %d of %d not found", i, bit, off, len(orig))
		}
		br := r.Breaks[0]
		if br.First == 0 || br.First > 500 {
			t.Fatalf("case %d: break names no sequence: %v", i, br)
		}
		if !strings.Contains(r.Err().Error(), "sequence") {
			t.Fatalf("case %d: %v", i, r.Err())
		}
	}
}
