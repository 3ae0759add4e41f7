package integrity

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events/chain"
	"github.com/jetplane/jetplane/internal/atomicfile"
)

// Files in the integrity directory.
const (
	KeyFile         = "instance.key"
	CheckpointsFile = "checkpoints"
)

// Checkpoint is a signed statement by one instance: the chain head after
// sequence Seq of Stream was Head at Time.
type Checkpoint struct {
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	Head   string    `json:"head"`
	Time   time.Time `json:"time"`
	// Key is the instance's Ed25519 public key, Sig the signature of
	// Signed(), both in standard base64.
	Key string `json:"key"`
	Sig string `json:"sig"`
	// Block is the index of the block file Seq was stored in: a hint
	// (not signed) that names the files missing from a log cut short.
	Block uint32 `json:"block,omitempty"`
}

// Signed is the exact text a checkpoint's signature covers:
//
//	jetplane checkpoint v1\n<stream>\n<seq>\n<head hex>\n<time RFC 3339, nanoseconds, UTC>\n
func (c Checkpoint) Signed() []byte {
	return fmt.Appendf(nil, "jetplane checkpoint v1\n%s\n%d\n%s\n%s\n", c.Stream, c.Seq, c.Head, c.Time.UTC().Format(time.RFC3339Nano))
}

// Check verifies the signature against the checkpoint's own key and, when
// trusted is not nil, that the key is trusted.
func (c Checkpoint) Check(trusted ed25519.PublicKey) error {
	key, err := base64.StdEncoding.DecodeString(c.Key)
	if err != nil || len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("checkpoint of sequence %d: bad key", c.Seq)
	}
	if trusted != nil && !bytes.Equal(key, trusted) {
		return fmt.Errorf("checkpoint of sequence %d: signed by another key (%s) than this instance's", c.Seq, c.Key)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Sig)
	if err != nil || !ed25519.Verify(key, c.Signed(), sig) {
		return fmt.Errorf("checkpoint of sequence %d: the signature does not match", c.Seq)
	}
	return nil
}

// Keeper holds the instance key and the checkpoints in a directory. It is
// safe for concurrent use.
type Keeper struct {
	dir    string
	stream string
	priv   ed25519.PrivateKey

	mu  sync.Mutex
	cps []Checkpoint
}

// ErrKeyMissing means checkpoints exist but the key that signed them is gone.
var ErrKeyMissing = errors.New("the instance key that signed the checkpoints is missing")

// OpenKeeper opens (creating on first use) the integrity directory dir.
// A missing key beside existing checkpoints is refused (ErrKeyMissing):
// a new key would make checkpoints nobody can tell from forged ones.
func OpenKeeper(dir, stream string) (*Keeper, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("integrity: %w", err)
	}
	k := &Keeper{dir: dir, stream: stream}
	cps, err := readCheckpoints(filepath.Join(dir, CheckpointsFile))
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, KeyFile)
	seed, err := os.ReadFile(keyPath)
	switch {
	case errors.Is(err, os.ErrNotExist) && len(cps) > 0:
		return nil, fmt.Errorf("integrity: %s: %w; restore it from a backup of the data directory, or, to start a new chain of trust knowingly, move %s aside", keyPath, ErrKeyMissing, filepath.Join(dir, CheckpointsFile))
	case errors.Is(err, os.ErrNotExist):
		seed = make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		if err := atomicfile.Write(keyPath, []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("integrity: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("integrity: %w", err)
	default:
		if seed, err = base64.StdEncoding.DecodeString(string(bytes.TrimSpace(seed))); err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("integrity: %s is not an instance key", keyPath)
		}
	}
	k.priv = ed25519.NewKeyFromSeed(seed)
	pub := k.Public()
	for _, c := range cps {
		if err := c.Check(pub); err != nil {
			return nil, fmt.Errorf("integrity: %s: %w", filepath.Join(dir, CheckpointsFile), err)
		}
	}
	k.cps = cps
	return k, nil
}

// Public is the instance's public key.
func (k *Keeper) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Dir is the integrity directory.
func (k *Keeper) Dir() string { return k.dir }

// Last is the latest checkpoint (ok false before the first).
func (k *Keeper) Last() (Checkpoint, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.cps) == 0 {
		return Checkpoint{}, false
	}
	return k.cps[len(k.cps)-1], true
}

// All returns the checkpoints kept, oldest first.
func (k *Keeper) All() []Checkpoint {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Checkpoint(nil), k.cps...)
}

// keepEvery and keepRecent thin the checkpoints kept: the last keepRecent,
// and before them the first one past each multiple of keepEvery.
const (
	keepEvery  = 1 << 16
	keepRecent = 256
)

// Add signs a checkpoint of seq and head and stores it (written and synced
// before Add returns).
func (k *Keeper) Add(seq uint64, head chain.Head, now time.Time, block uint32) (Checkpoint, error) {
	c := Checkpoint{Stream: k.stream, Seq: seq, Head: head.String(), Time: now.UTC(), Key: base64.StdEncoding.EncodeToString(k.Public()), Block: block}
	c.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, c.Signed()))
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.cps); n > 0 && k.cps[n-1].Seq >= seq {
		return k.cps[n-1], nil
	}
	cps := thin(append(k.cps, c))
	var buf bytes.Buffer
	for _, c := range cps {
		b, _ := json.Marshal(c)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := atomicfile.Write(filepath.Join(k.dir, CheckpointsFile), buf.Bytes(), 0o600); err != nil {
		return c, fmt.Errorf("integrity: checkpoint: %w", err)
	}
	k.cps = cps
	return c, nil
}

func thin(cps []Checkpoint) []Checkpoint {
	if len(cps) <= keepRecent {
		return cps
	}
	old, recent := cps[:len(cps)-keepRecent], cps[len(cps)-keepRecent:]
	var out []Checkpoint
	for i, c := range old {
		if i == 0 || c.Seq/keepEvery != old[i-1].Seq/keepEvery {
			out = append(out, c)
		}
	}
	return append(out, recent...)
}

func readCheckpoints(path string) ([]Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("integrity: %w", err)
	}
	defer f.Close()
	var out []Checkpoint
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var c Checkpoint
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("integrity: %s line %d: %w", path, line, err)
		}
		if n := len(out); n > 0 && out[n-1].Seq >= c.Seq {
			return nil, fmt.Errorf("integrity: %s line %d: sequence %d after %d; the file was edited", path, line, c.Seq, out[n-1].Seq)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// LoadCheckpoints reads the checkpoints of an integrity directory without
// changing it (an offline verify of a stopped instance's data): each must
// be signed by the instance key kept there, or, when the key file is
// gone, by the key of the first checkpoint.
func LoadCheckpoints(dir string) ([]Checkpoint, error) {
	cps, err := readCheckpoints(filepath.Join(dir, CheckpointsFile))
	if err != nil || len(cps) == 0 {
		return cps, err
	}
	var trusted ed25519.PublicKey
	if b, err := os.ReadFile(filepath.Join(dir, KeyFile)); err == nil {
		seed, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("integrity: %s is not an instance key", filepath.Join(dir, KeyFile))
		}
		trusted = ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	} else if k, err := base64.StdEncoding.DecodeString(cps[0].Key); err == nil {
		trusted = k
	}
	for _, c := range cps {
		if err := c.Check(trusted); err != nil {
			return nil, fmt.Errorf("integrity: %s: %w", filepath.Join(dir, CheckpointsFile), err)
		}
	}
	return cps, nil
}
