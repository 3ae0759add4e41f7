package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// Fields lists, per kind, the spec fields whose values are secret: each is
// a map of string values, every value sealed on its own (the map's keys
// stay readable, as kubectl describe shows them).
var Fields = map[string][]string{
	"Secret": {"data", "stringData"},
}

const (
	// prefix starts every sealed value: prefix + KEK id + ":" + data key
	// id + ":" + base64(nonce | ciphertext).
	prefix = "jp:sealed:v1:"
	// Masked replaces a sealed value in output for whoever may not, or did
	// not ask to, see it.
	Masked = "*****"
	// Destroyed replaces a sealed value whose data key was destroyed.
	Destroyed = "(destroyed)"
)

// ErrNoKey is returned when a secret must be sealed but there is no key file.
var ErrNoKey = errors.New("no encryption key; start jetplane with --encryption-key-file")

// KeyStore keeps wrapped data keys (events.KeyBucket).
type KeyStore interface {
	Create(ctx context.Context, id string, value []byte) error
	Get(ctx context.Context, id string) ([]byte, error)
	Destroy(ctx context.Context, prefix string) (int, error)
}

var _ KeyStore = (*events.KeyBucket)(nil)

// Sealer seals and unseals objects' secret fields. It is safe for
// concurrent use.
type Sealer struct {
	path string
	keys KeyStore

	mu      sync.Mutex
	kf      *KeyFile
	stamp   string
	current map[string]dataKey // object token → data key new values use
	plain   map[string][]byte  // data key id → unwrapped key
}

type dataKey struct {
	id, kek string
	key     []byte
}

// New returns a Sealer with the key file at path and data keys in keys.
func New(path string, keys KeyStore) (*Sealer, error) {
	kf, err := LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	s := &Sealer{path: path, keys: keys, kf: kf, current: map[string]dataKey{}, plain: map[string][]byte{}}
	s.stamp = stampOf(path)
	return s, nil
}

func stampOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

// keyFile returns the key file, reloaded when it changed (keys rotate
// while jetplane runs): one stat per call, and calls come only when a
// value is sealed or a data key is first unwrapped.
func (s *Sealer) keyFile() *KeyFile {
	if st := stampOf(s.path); st != s.stamp {
		if kf, err := LoadKeyFile(s.path); err == nil {
			s.kf, s.stamp = kf, st
		}
	}
	return s.kf
}

// Primary is the ID of the key-encryption key new data keys are wrapped by.
func (s *Sealer) Primary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyFile().Primary
}

// Secret reports whether kind has secret fields.
func Secret(kind string) bool { _, ok := Fields[kind]; return ok }

// objectToken names an object's data keys in the key store without
// revealing its name: data key ids are token + "." + random.
func objectToken(kind, ns, name string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + ns + "\x00" + name))
	return hex.EncodeToString(h[:16])
}

func aad(kind, ns, name, field, key string) []byte {
	return []byte(kind + "\x00" + ns + "\x00" + name + "\x00" + field + "\x00" + key)
}

// secretMap is one map of secret values in an object: its field name (as
// the values' associated data names it) and the map.
type secretMap struct {
	field string
	m     *structpb.Struct
}

// ApplyKind is the kind whose spec.manifest may hold a Kubernetes Secret,
// sealed like a Secret of jetplane's own (field "manifest.data").
const ApplyKind = "Apply"

// Holds reports whether o may carry secret values: a kind with secret
// fields, or an Apply whose manifest is a Secret.
func Holds(o *schemas.Object) bool {
	if Secret(o.GetKind()) {
		return true
	}
	return o.GetKind() == ApplyKind && isSecretManifest(o.GetSpec().GetFields()["manifest"].GetStructValue())
}

func isSecretManifest(m *structpb.Struct) bool {
	f := m.GetFields()
	return f["kind"].GetStringValue() == "Secret" && f["apiVersion"].GetStringValue() == "v1"
}

// secretMaps lists o's maps of secret values; a field that is present but
// not a map is an error.
func secretMaps(o *schemas.Object) ([]secretMap, error) {
	var out []secretMap
	add := func(from *structpb.Struct, prefix string, fields []string) error {
		for _, f := range fields {
			v, ok := from.GetFields()[f]
			if !ok {
				continue
			}
			m := v.GetStructValue()
			if m == nil {
				if _, null := v.GetKind().(*structpb.Value_NullValue); null {
					continue
				}
				return fmt.Errorf("spec.%s%s: want a map of strings", prefix, f)
			}
			out = append(out, secretMap{field: prefix + f, m: m})
		}
		return nil
	}
	if fields := Fields[o.GetKind()]; len(fields) > 0 {
		return out, add(o.GetSpec(), "", fields)
	}
	if o.GetKind() == ApplyKind {
		if m := o.GetSpec().GetFields()["manifest"].GetStructValue(); isSecretManifest(m) {
			return out, add(m, "manifest.", Fields["Secret"])
		}
	}
	return nil, nil
}

// lookup finds map key k of field in o (nil when absent).
func lookup(o *schemas.Object, field, k string) *structpb.Value {
	maps, _ := secretMaps(o)
	for _, sm := range maps {
		if sm.field == field {
			return sm.m.GetFields()[k]
		}
	}
	return nil
}

// Seal replaces every secret value of o (in place) by its envelope. A
// value equal to current's (the object as stored now, may be nil) keeps
// current's envelope, so applying the same Secret again changes nothing.
// A sealer-less caller (s nil) gets ErrNoKey for an object with secrets.
func (s *Sealer) Seal(ctx context.Context, o, current *schemas.Object) error {
	maps, err := secretMaps(o)
	if err != nil {
		return err
	}
	md := o.GetMetadata()
	for _, sm := range maps {
		f, m := sm.field, sm.m
		for k, val := range m.GetFields() {
			str, ok := val.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return fmt.Errorf("spec.%s.%s: want a string", f, k)
			}
			if strings.HasPrefix(str.StringValue, prefix) && s != nil {
				// Already sealed for this very object (a value read back
				// from the log): kept; one sealed for another object does
				// not open here, and is sealed again below.
				if _, err := s.open(ctx, str.StringValue, aad(o.GetKind(), md.GetNamespace(), md.GetName(), f, k)); err == nil {
					continue
				}
			}
			if s == nil {
				return ErrNoKey
			}
			if old := lookup(current, f, k).GetStringValue(); strings.HasPrefix(old, prefix) {
				if plain, err := s.open(ctx, old, aad(o.GetKind(), md.GetNamespace(), md.GetName(), f, k)); err == nil && plain == str.StringValue {
					m.Fields[k] = structpb.NewStringValue(old)
					continue
				}
			}
			env, err := s.seal(ctx, o.GetKind(), md.GetNamespace(), md.GetName(), str.StringValue, aad(o.GetKind(), md.GetNamespace(), md.GetName(), f, k))
			if err != nil {
				return fmt.Errorf("spec.%s.%s: %w", f, k, err)
			}
			m.Fields[k] = structpb.NewStringValue(env)
		}
	}
	return nil
}

func (s *Sealer) seal(ctx context.Context, kind, ns, name, plain string, ad []byte) (string, error) {
	dk, err := s.dataKey(ctx, objectToken(kind, ns, name))
	if err != nil {
		return "", err
	}
	ct, err := gcmSeal(dk.key, []byte(plain), ad)
	if err != nil {
		return "", err
	}
	return prefix + dk.kek + ":" + dk.id + ":" + base64.StdEncoding.EncodeToString(ct), nil
}

// dataKey returns the data key new values of the object use, making one
// (wrapped by the primary key) when there is none for the primary key.
func (s *Sealer) dataKey(ctx context.Context, token string) (dataKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kf := s.keyFile()
	if dk, ok := s.current[token]; ok && dk.kek == kf.Primary {
		return dk, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return dataKey{}, err
	}
	r := make([]byte, 8)
	if _, err := rand.Read(r); err != nil {
		return dataKey{}, err
	}
	id := token + "." + hex.EncodeToString(r)
	wrapped, err := gcmSeal(kf.keys[kf.Primary], key, []byte(id))
	if err != nil {
		return dataKey{}, err
	}
	if err := s.keys.Create(ctx, id, []byte(kf.Primary+":"+base64.StdEncoding.EncodeToString(wrapped))); err != nil {
		return dataKey{}, err
	}
	dk := dataKey{id: id, kek: kf.Primary, key: key}
	s.current[token] = dk
	s.plain[id] = key
	return dk, nil
}

// errDestroyed is returned for a value whose data key is gone.
var errDestroyed = errors.New("data key destroyed")

// open returns the plaintext of envelope env.
func (s *Sealer) open(ctx context.Context, env string, ad []byte) (string, error) {
	parts := strings.SplitN(strings.TrimPrefix(env, prefix), ":", 3)
	if len(parts) != 3 {
		return "", errors.New("malformed sealed value")
	}
	id := parts[1]
	s.mu.Lock()
	key, ok := s.plain[id]
	kf := s.keyFile()
	s.mu.Unlock()
	if !ok {
		raw, err := s.keys.Get(ctx, id)
		if errors.Is(err, events.ErrNotFound) {
			return "", errDestroyed
		}
		if err != nil {
			return "", err
		}
		kek, wrapped, found := strings.Cut(string(raw), ":")
		if !found {
			return "", errors.New("malformed data key")
		}
		kekKey, ok := kf.keys[kek]
		if !ok {
			return "", fmt.Errorf("data key %s is wrapped by key %s, which the key file lacks", id, kek)
		}
		w, err := base64.StdEncoding.DecodeString(wrapped)
		if err != nil {
			return "", err
		}
		if key, err = gcmOpen(kekKey, w, []byte(id)); err != nil {
			return "", fmt.Errorf("data key %s: %w", id, err)
		}
		s.mu.Lock()
		s.plain[id] = key
		s.mu.Unlock()
	}
	ct, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return "", err
	}
	plain, err := gcmOpen(key, ct, ad)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// Shred destroys every data key of the object: its sealed values, in
// current state and in every event of its history, can never be read
// again. The events themselves stay.
func (s *Sealer) Shred(ctx context.Context, kind, ns, name string) (int, error) {
	token := objectToken(kind, ns, name)
	s.mu.Lock()
	delete(s.current, token)
	for id := range s.plain {
		if strings.HasPrefix(id, token+".") {
			delete(s.plain, id)
		}
	}
	s.mu.Unlock()
	return s.keys.Destroy(ctx, token)
}

// Mask returns o with every sealed value replaced by Masked (o itself
// when it has none; never modified).
func Mask(o *schemas.Object) *schemas.Object {
	return rewrite(o, func(string, string, string) string { return Masked })
}

// Reveal returns o with every sealed value opened (Destroyed for one whose
// data key was shredded); o itself is not modified.
func (s *Sealer) Reveal(ctx context.Context, o *schemas.Object) *schemas.Object {
	md := o.GetMetadata()
	return rewrite(o, func(field, key, env string) string {
		if s == nil {
			return Masked
		}
		plain, err := s.open(ctx, env, aad(o.GetKind(), md.GetNamespace(), md.GetName(), field, key))
		if errors.Is(err, errDestroyed) {
			return Destroyed
		}
		if err != nil {
			return "(unreadable: " + err.Error() + ")"
		}
		return plain
	})
}

// rewrite returns a copy of o with each sealed value v of field f, map
// key k replaced by fn(f, k, v); o when nothing is sealed.
func rewrite(o *schemas.Object, fn func(field, key, env string) string) *schemas.Object {
	maps, _ := secretMaps(o)
	var out *schemas.Object
	for _, sm := range maps {
		for k, v := range sm.m.GetFields() {
			env := v.GetStringValue()
			if !strings.HasPrefix(env, prefix) {
				continue
			}
			if out == nil {
				out = proto.Clone(o).(*schemas.Object)
			}
			om, _ := secretMaps(out)
			for _, osm := range om {
				if osm.field == sm.field {
					osm.m.Fields[k] = structpb.NewStringValue(fn(sm.field, k, env))
				}
			}
		}
	}
	if out == nil {
		return o
	}
	return out
}

func gcmSeal(key, plain, ad []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, plain, ad), nil
}

func gcmOpen(key, ct, ad []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(ct) < gcm.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	return gcm.Open(nil, ct[:gcm.NonceSize()], ct[gcm.NonceSize():], ad)
}

// Forget drops the cached data key id (destroyed by another instance):
// values it sealed no longer open here either.
func (s *Sealer) Forget(id string) {
	token, _, _ := strings.Cut(id, ".")
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.plain, id)
	if dk, ok := s.current[token]; ok && dk.id == id {
		delete(s.current, token)
	}
}
