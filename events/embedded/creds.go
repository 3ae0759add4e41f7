package embedded

import (
	"encoding/base64"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// credentials admits the store's credentials to the server: a client
// proves its nkey by signing the server's nonce, and gets its
// credential's permissions. It replaces the server's own nkey users so
// that a change of credentials (`jetplane creds create|revoke` from
// another process) never reloads the server's options: a reload swaps
// the options under requests that read them without a lock (direct gets
// read the server's MaxPending), a data race in the server.
type credentials struct {
	mu    sync.RWMutex
	perms map[string]*server.Permissions // by public nkey
}

func newCredentials(users []*server.NkeyUser) *credentials {
	c := &credentials{}
	c.set(users)
	return c
}

// set replaces the users and returns the public keys whose permissions
// changed or that are gone: their connections must be closed, so that
// they reconnect under the new rules or not at all.
func (c *credentials) set(users []*server.NkeyUser) (changed []string) {
	perms := make(map[string]*server.Permissions, len(users))
	for _, u := range users {
		perms[u.Nkey] = u.Permissions
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, old := range c.perms {
		if now, ok := perms[k]; !ok || !samePermissions(old, now) {
			changed = append(changed, k)
		}
	}
	c.perms = perms
	return changed
}

func samePermissions(a, b *server.Permissions) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Check implements server.Authentication.
func (c *credentials) Check(client server.ClientAuthentication) bool {
	o := client.GetOpts()
	if o == nil || o.Nkey == "" {
		return false
	}
	c.mu.RLock()
	perms, ok := c.perms[o.Nkey]
	c.mu.RUnlock()
	// No nonce, nothing proven; and no permissions would mean all of
	// them to the server: every credential's role gives some.
	if !ok || perms == nil || len(client.GetNonce()) == 0 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(o.Sig)
	if err != nil {
		if sig, err = base64.StdEncoding.DecodeString(o.Sig); err != nil {
			return false
		}
	}
	pub, err := nkeys.FromPublicKey(o.Nkey)
	if err != nil || pub.Verify(client.GetNonce(), sig) != nil {
		return false
	}
	client.RegisterUser(&server.User{Permissions: perms})
	return true
}
