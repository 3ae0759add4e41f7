package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jetplane/jetplane/bridge/kubeapi"
)

// MountKubernetes serves the Kubernetes API (package kubeapi) on the
// server's listener at kubeapi.Paths. Its requests count against the
// caller's limits like every other (a watch as a long request) and its
// watches end when the server shuts down.
func (s *Server) MountKubernetes(h http.Handler) {
	for _, p := range kubeapi.Paths {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			// Shutting down, or not ready yet (the projection still
			// catching up after a start): a request is told to come back,
			// as kube-apiserver does, so that a client's watch retries (on
			// another instance, or this one restarted) rather than
			// relisting, which client-go does after any other error.
			if s.streams.Err() != nil {
				comeBack(w, "the server is shutting down")
				return
			}
			if ready := s.cfg.Ready(); ready != nil {
				comeBack(w, "the server is not ready: "+ready.Error())
				return
			}
			p, err := s.authenticate(r)
			if err != nil {
				// kubeapi answers 401 in its own shape.
				h.ServeHTTP(w, r)
				return
			}
			long := r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
			release, err := s.limits.admit(p, long)
			if err != nil {
				if le := (*limited)(nil); errors.As(err, &le) {
					_ = writeLimited(w, le)
				} else {
					s.writeError(w, r, err)
				}
				return
			}
			defer release()
			if long {
				var stop func()
				r, stop = s.whileTokenHolds(r, p)
				defer stop()
				ctx, done := s.stream(w, r)
				defer done()
				r = r.WithContext(ctx)
			}
			h.ServeHTTP(w, r)
		})
	}
}

// comeBack answers 429 with Retry-After, in the Kubernetes API's shape
// (decision 0076): client-go retries it, and its reflector resumes a
// watch after it instead of listing again.
func comeBack(w http.ResponseWriter, msg string) {
	body, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": "TooManyRequests", "code": http.StatusTooManyRequests,
		"details": map[string]any{"retryAfterSeconds": 1}})
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}

// KubeCaller is the Kubernetes API's authentication: the same bearer
// tokens, roles and namespaces as the rest of the API.
func (s *Server) KubeCaller(r *http.Request) (kubeapi.Caller, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return kubeapi.Caller{}, err
	}
	return kubeapi.Caller{Principal: p.gate(), SeeSecrets: p.CanSeeSecrets()}, nil
}
