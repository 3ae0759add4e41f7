package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jetplane/jetplane/events/integrity"
)

// Integrity answers GET /v1/verify and GET /v1/checkpoints (package
// events/integrity); nil leaves both out.
type Integrity interface {
	// Verify walks the stored log from sequence from (0: the whole log)
	// and holds it to the signed checkpoints.
	Verify(ctx context.Context, from uint64) (integrity.Report, error)
	// Checkpoints are the signed checkpoints kept, oldest first, and the
	// instance's public key (base64).
	Checkpoints() ([]integrity.Checkpoint, string)
}

// VerifyResponse is GET /v1/verify's answer.
type VerifyResponse struct {
	OK     bool             `json:"ok"`
	Report integrity.Report `json:"report"`
	// Error names the damage and what to do ("" when OK).
	Error string `json:"error,omitempty"`
}

// CheckpointsResponse is GET /v1/checkpoints's answer.
type CheckpointsResponse struct {
	Key         string                 `json:"key"`
	Checkpoints []integrity.Checkpoint `json:"checkpoints"`
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request, _ string) error {
	if s.cfg.Integrity == nil {
		return httpError(http.StatusNotImplemented, "this server keeps no chain over its log (an outside NATS); verify a stopped data directory with jetplane verify --data")
	}
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return httpError(http.StatusBadRequest, fmt.Sprintf("from: %q is not a sequence", v))
		}
		from = n
	}
	rep, err := s.cfg.Integrity.Verify(r.Context(), from)
	if err != nil {
		return err
	}
	resp := VerifyResponse{OK: rep.OK(), Report: rep}
	if err := rep.Err(); err != nil {
		resp.Error = err.Error()
	}
	return writeJSON(w, resp)
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request, _ string) error {
	if s.cfg.Integrity == nil {
		return httpError(http.StatusNotImplemented, "this server keeps no chain over its log (an outside NATS)")
	}
	cps, key := s.cfg.Integrity.Checkpoints()
	if cps == nil {
		cps = []integrity.Checkpoint{}
	}
	return writeJSON(w, CheckpointsResponse{Key: key, Checkpoints: cps})
}

// Verify asks the server to verify its log from sequence from (0: all).
func (c *Client) Verify(ctx context.Context, from uint64) (*VerifyResponse, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatUint(from, 10))
	}
	var out VerifyResponse
	if err := c.do(ctx, http.MethodGet, "/v1/verify", q, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkpoints lists the server's signed checkpoints.
func (c *Client) Checkpoints(ctx context.Context) (*CheckpointsResponse, error) {
	var out CheckpointsResponse
	if err := c.do(ctx, http.MethodGet, "/v1/checkpoints", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
