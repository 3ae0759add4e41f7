package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/jetplane/jetplane/events"
)

// Files in a store directory.
const (
	// InstanceFile is the instance credential: jetplane's own connection.
	InstanceFile = "instance.creds"
	// UsersFile lists the credentials handed out (public keys only).
	UsersFile = "users.json"
	// loadedFile holds the stamp of the users file a running server last
	// loaded (MarkLoaded), so a writer can wait until its change is live.
	loadedFile = "users.loaded"
)

// ErrNotFound is returned for a credential name the store does not hold.
var ErrNotFound = errors.New("no such credential")

// Cred is a credential handed out. The store keeps its public key only;
// the seed went to whoever asked for it.
type Cred struct {
	Name    string     `json:"name"`
	Role    Role       `json:"role"`
	Key     string     `json:"key"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Kinds are the kinds a controller credential runs (RoleController).
	Kinds []string `json:"kinds,omitempty"`
	// Tag is a subscriber's or controller's consumer tag, random, in its
	// consumers' names (ConsumerPrefix); empty for one issued before
	// tags (decision 0122).
	Tag string `json:"tag,omitempty"`
}

type usersFile struct {
	Users []Cred `json:"users"`
}

// Store is a directory of credentials. Several processes may use one
// directory at once (a running server reads it, `jetplane creds` writes
// it): writes take a file lock and replace files atomically.
type Store struct {
	dir string

	// cached is the users file as last read by current, under the file
	// identity it was read at, so checks that run per request (controller
	// tokens) cost a stat, not a read and a decode.
	mu     sync.Mutex
	cached *usersFile
	at     fileID
}

// fileID tells one version of the users file from another: update
// replaces the file by renaming a new one over it, so its inode, time or
// size changes with every write (a revocation or a new credential also
// makes it longer).
type fileID struct {
	ino, size int64
	mtime     int64
}

// Open opens the store in dir, creating it and the instance credential
// on first use (mode 0700 and 0600).
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	s := &Store{dir: dir}
	if _, err := os.Stat(s.InstanceCreds()); errors.Is(err, os.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		data, err := encode(kp, RoleInstance, "jetplane", "")
		if err != nil {
			return nil, err
		}
		// Link, not rename: when several servers share a directory and
		// start at once, the first key wins and the others read it.
		if err := writeExclusive(s.InstanceCreds(), data); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// InstanceCreds is the path of the instance credential file.
func (s *Store) InstanceCreds() string { return filepath.Join(s.dir, InstanceFile) }

// UsersPath is the path of the users file; its changes are what a running
// server reloads.
func (s *Store) UsersPath() string { return filepath.Join(s.dir, UsersFile) }

// Create makes a credential for role and name and returns its creds file
// contents; the store keeps only the public key. Names are unique across
// roles while not revoked.
func (s *Store) Create(role Role, name string) ([]byte, error) {
	return s.CreateWithKinds(role, name, nil)
}

// CreateWithKinds is Create for a role that takes kinds: a controller's
// kinds, as keys name them (Widget.example.com). A kind belongs to one
// live controller credential at most: a second one claiming it is
// refused, so two controllers never run one kind (decision 0049).
func (s *Store) CreateWithKinds(role Role, name string, kinds []string) ([]byte, error) {
	if !slices.Contains(Roles, role) {
		return nil, fmt.Errorf("role %q: use one of subscriber, node, controller", role)
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	if (role == RoleController) != (len(kinds) > 0) {
		return nil, fmt.Errorf("role %s: --kinds is for the controller role, and the controller role needs it", role)
	}
	if role == RoleController {
		if err := validControllerName(name); err != nil {
			return nil, err
		}
		for _, k := range kinds {
			if k == "" || strings.ContainsAny(k, " \t/*>") {
				return nil, fmt.Errorf("kind %q: give kinds as keys name them, such as Widget.example.com", k)
			}
		}
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	var tag string
	if role == RoleSubscriber || role == RoleController {
		if tag, err = newTag(); err != nil {
			return nil, err
		}
		// JetStream names are at most 255 characters: leave room for
		// the names the credential's consumers add to its prefix.
		if p := ConsumerPrefix(role, name, tag); len(p) > MaxConsumerPrefix {
			return nil, fmt.Errorf("name %q: its consumers' names would start with %d characters, more than %d; give a shorter name (as escaped in a subject, %q)", name, len(p), MaxConsumerPrefix, events.EscapeToken(name))
		}
	}
	data, err := encode(kp, role, name, tag)
	if err != nil {
		return nil, err
	}
	err = s.update(func(u *usersFile) error {
		for _, c := range u.Users {
			if c.Name == name && c.Revoked == nil {
				return fmt.Errorf("credential %q exists (role %s); revoke it first or choose another name", name, c.Role)
			}
			for _, k := range kinds {
				if c.Revoked == nil && slices.Contains(c.Kinds, k) {
					return fmt.Errorf("kind %s: controller %q runs it already; one kind has one controller (run more replicas of %q, or revoke it first)", k, c.Name, c.Name)
				}
			}
		}
		u.Users = append(u.Users, Cred{Name: name, Role: role, Key: pub, Created: time.Now().UTC(), Kinds: slices.Clone(kinds), Tag: tag})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Revoke revokes the live credential called name: a running server drops
// its connections and refuses it from then on.
func (s *Store) Revoke(name string) error {
	return s.update(func(u *usersFile) error {
		for i, c := range u.Users {
			if c.Name == name && c.Revoked == nil {
				now := time.Now().UTC()
				u.Users[i].Revoked = &now
				return nil
			}
		}
		return fmt.Errorf("credential %q: %w (see jetplane creds ls)", name, ErrNotFound)
	})
}

// List returns every credential handed out, revoked ones included.
func (s *Store) List() ([]Cred, error) {
	u, err := s.read()
	if err != nil {
		return nil, err
	}
	return u.Users, nil
}

// Users are the NATS users a server admits: the instance and every live
// credential, each with its role's permissions, all in the global account
// (where the log has always lived, so an upgraded store keeps its streams).
func (s *Store) Users() ([]*server.NkeyUser, error) {
	data, err := os.ReadFile(s.InstanceCreds())
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return nil, fmt.Errorf("credentials: %s: %w", s.InstanceCreds(), err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	users := []*server.NkeyUser{{Nkey: pub, Permissions: InstancePermissions()}}
	u, err := s.read()
	if err != nil {
		return nil, err
	}
	for _, c := range u.Users {
		if c.Revoked != nil {
			continue
		}
		p, err := PermissionsOf(c)
		if err != nil {
			return nil, fmt.Errorf("credentials: %s: %w", c.Name, err)
		}
		users = append(users, &server.NkeyUser{Nkey: c.Key, Permissions: p})
	}
	return users, nil
}

func (s *Store) read() (*usersFile, error) {
	data, err := os.ReadFile(s.UsersPath())
	if errors.Is(err, os.ErrNotExist) {
		return &usersFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	var u usersFile
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("credentials: %s: %w", s.UsersPath(), err)
	}
	return &u, nil
}

// current is the users file as it is now, read again only when it has
// been replaced since the last call. What it returns is shared: callers
// must not change it.
func (s *Store) current() (*usersFile, error) {
	fi, err := os.Stat(s.UsersPath())
	if errors.Is(err, os.ErrNotExist) {
		return &usersFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = int64(st.Ino)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && s.at == id {
		return s.cached, nil
	}
	// Read after the stat: what is read is at least as new as id, and a
	// newer file has another id, so the next call reads again.
	u, err := s.read()
	if err != nil {
		return nil, err
	}
	// A file replaced moments ago is not kept: two replacements within
	// one tick of the file system's clock could reuse an inode and a size
	// and leave the time alone, so its identity proves nothing until the
	// clock has moved on.
	if time.Since(fi.ModTime()) > racyWindow {
		s.cached, s.at = u, id
	}
	return u, nil
}

// racyWindow is how old the users file must be before its identity
// stands for its contents (coarse file times are a few milliseconds on
// Linux, up to two seconds on some file systems).
const racyWindow = 2 * time.Second

func (s *Store) update(fn func(*usersFile) error) error {
	unlock, err := lockFile(filepath.Join(s.dir, "users.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	u, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(u); err != nil {
		return err
	}
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".users-*")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.UsersPath()); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

// writeExclusive writes data to path (mode 0600) unless path exists.
func writeExclusive(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".creds-*")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

// Controllers maps each kind a live controller credential runs to that
// controller's name.
func (s *Store) Controllers() (map[string]string, error) {
	u, err := s.read()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range u.Users {
		if c.Revoked == nil && c.Role == RoleController {
			for _, k := range c.Kinds {
				out[k] = c.Name
			}
		}
	}
	return out, nil
}

// validControllerName admits DNS-1123 labels: a controller's name is part
// of its members bucket's name and of its subjects as it is.
func validControllerName(name string) error {
	if len(name) > 63 {
		return fmt.Errorf("controller name %q: at most 63 characters", name)
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(name)-1) {
			return fmt.Errorf("controller name %q: use lower-case letters, digits and '-' (not first or last)", name)
		}
	}
	return nil
}

// validName admits names that are one subject token after escaping, as
// node names and DNS-1123 names are.
// MaxConsumerPrefix is the longest a credential's consumer prefix
// (ConsumerPrefix) may be: 200 of JetStream's 255 characters a name,
// leaving 55 to the names its consumers add.
const MaxConsumerPrefix = 200

func validName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("name %q: give 1 to 253 characters", name)
	}
	if strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("name %q: no white space", name)
	}
	if events.EscapeToken(name) == "" {
		return fmt.Errorf("name %q: not usable", name)
	}
	return nil
}

// UsersStamp identifies the users file's current contents (modification
// time and size; "" when it does not exist).
func (s *Store) UsersStamp() string {
	fi, err := os.Stat(s.UsersPath())
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

// MarkLoaded records that a running server admits the users of stamp.
func (s *Store) MarkLoaded(stamp string) error {
	return os.WriteFile(filepath.Join(s.dir, loadedFile), []byte(stamp), 0o600)
}

// Loaded reports whether a running server has loaded the users file as
// it is now (a change made by Create or Revoke is live).
func (s *Store) Loaded() bool {
	data, err := os.ReadFile(filepath.Join(s.dir, loadedFile))
	return err == nil && string(data) == s.UsersStamp()
}
