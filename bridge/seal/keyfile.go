package seal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A key file holds key-encryption keys, one "ID BASE64-KEY" per line
// (32-byte keys; # comments allowed). The first key is the primary: new
// data keys are wrapped by it. The others stay to unwrap data keys made
// before a rotation.
type KeyFile struct {
	// Primary is the ID of the key new data keys are wrapped by.
	Primary string
	keys    map[string][]byte
}

// LoadKeyFile reads a key file; it refuses a file others may read.
func LoadKeyFile(path string) (*KeyFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("encryption key file %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	return parseKeyFile(path, data)
}

func parseKeyFile(path string, data []byte) (*KeyFile, error) {
	kf := &KeyFile{keys: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("encryption key file %s, line %d: want \"ID BASE64-KEY\"", path, n)
		}
		if !validID(f[0]) {
			return nil, fmt.Errorf("encryption key file %s, line %d: key id %q: use letters, digits and '-'", path, n, f[0])
		}
		key, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("encryption key file %s, line %d: key %s is not 32 bytes in base64", path, n, f[0])
		}
		if _, dup := kf.keys[f[0]]; dup {
			return nil, fmt.Errorf("encryption key file %s, line %d: key id %s given twice", path, n, f[0])
		}
		if kf.Primary == "" {
			kf.Primary = f[0]
		}
		kf.keys[f[0]] = key
	}
	if kf.Primary == "" {
		return nil, fmt.Errorf("encryption key file %s: no keys; create one with jetplane keys rotate --key-file %s", path, path)
	}
	return kf, nil
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// RotateKeyFile puts a new random key first in the key file at path
// (creating the file, mode 0600, if it does not exist) and returns its ID.
// Data keys made from then on are wrapped by it; the older keys stay, so
// everything sealed before remains readable.
func RotateKeyFile(path string) (string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("encryption key file: %w", err)
	}
	if len(old) > 0 {
		if _, err := parseKeyFile(path, old); err != nil {
			return "", err
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	id := "k" + time.Now().UTC().Format("20060102T150405") + "-" + base64.RawURLEncoding.EncodeToString(key[:3])
	id = strings.NewReplacer("_", "-").Replace(id)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", id, base64.StdEncoding.EncodeToString(key))
	b.Write(old)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("encryption key file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return "", fmt.Errorf("encryption key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return "", fmt.Errorf("encryption key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("encryption key file: %w", err)
	}
	return id, nil
}

// Has reports whether the file holds key-encryption key id.
func (k *KeyFile) Has(id string) bool { _, ok := k.keys[id]; return ok }

// Unwraps reports whether key kek of the file opens a data key entry as
// the data key bucket stores it ("KEK:BASE64", under data key id): the
// check that a key file is the one the log's Secrets were sealed under,
// not another with the same key ids.
func (k *KeyFile) Unwraps(id string, entry []byte) error {
	kek, wrapped, ok := strings.Cut(string(entry), ":")
	if !ok {
		return errors.New("malformed data key")
	}
	key, ok := k.keys[kek]
	if !ok {
		return fmt.Errorf("the key file lacks key %s", kek)
	}
	w, err := base64.StdEncoding.DecodeString(wrapped)
	if err != nil {
		return err
	}
	if _, err := gcmOpen(key, w, []byte(id)); err != nil {
		return fmt.Errorf("key %s does not open data key %s: it is not the key that sealed it", kek, id)
	}
	return nil
}
