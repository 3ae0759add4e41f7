package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/bridge/seal"
	"github.com/jetplane/jetplane/schemas"
)

// Query parameters of secret handling.
const (
	// showSecretsParam=true asks for secret values in clear (admins, and
	// tokens granted +secrets); without it they are masked.
	showSecretsParam = "showSecrets"
	// purgeParam=true on DELETE destroys the object's data keys
	// (crypto-shredding; admins only).
	purgeParam = "purgeSecretData"
)

// authorizeSecrets refuses (403) a request for secret values, or to shred
// them, that p may not make.
func authorizeSecrets(p *Principal, q url.Values) error {
	if q.Get(showSecretsParam) == "true" && !p.CanSeeSecrets() {
		return httpError(http.StatusForbidden, fmt.Sprintf("%s may not see secret values; ask an admin for a token with +secrets", p.Name))
	}
	if q.Get(purgeParam) == "true" {
		t := gate.Target{Kind: q.Get("kind"), Namespace: q.Get("namespace"), Name: q.Get("name")}
		if err := gate.Authorize(p.gate(), gate.VerbShred, t); err != nil {
			return httpError(http.StatusForbidden, fmt.Sprintf("%s (role %s) may not destroy secret data of %s/%s/%s; only admins may, in their namespaces", p.Name, p.Role, t.Kind, t.Namespace, t.Name))
		}
	}
	return nil
}

// show is o as the request may see it: secret values in clear when asked
// for (authorizeSecrets has checked the right), else masked.
func (s *Server) show(r *http.Request, o *schemas.Object) *schemas.Object {
	if o == nil || !seal.Holds(o) {
		return o
	}
	if queryOf(r).Get(showSecretsParam) == "true" {
		return s.cfg.Sealer.Reveal(r.Context(), o)
	}
	return seal.Mask(o)
}

func (s *Server) showAll(r *http.Request, objs []*schemas.Object) []*schemas.Object {
	for i, o := range objs {
		objs[i] = s.show(r, o)
	}
	return objs
}

func (s *Server) showEvent(r *http.Request, ev *schemas.Event) *schemas.Event {
	o := s.show(r, ev.GetObject())
	if o == ev.GetObject() {
		return ev
	}
	out := proto.Clone(ev).(*schemas.Event)
	out.Object = o
	return out
}

// shred destroys k's data keys after a delete asked to purge secret data.
func (s *Server) shred(ctx context.Context, kind, ns, name string) error {
	if s.cfg.Sealer == nil {
		return httpError(http.StatusBadRequest, "this server has no encryption key, so it holds no secret data to destroy")
	}
	n, err := s.cfg.Sealer.Shred(ctx, kind, ns, name)
	if err != nil {
		return fmt.Errorf("destroy the data keys of %s %s/%s: %w", kind, ns, name, err)
	}
	s.cfg.Logger.Info("secret data destroyed", "kind", kind, "namespace", ns, "name", name, "data_keys", n)
	return nil
}
