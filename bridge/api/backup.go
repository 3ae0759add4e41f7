package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// backup streams an online backup of the log and the chart store.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, actor string) error {
	if s.cfg.Backup == nil {
		return httpError(http.StatusNotImplemented, "this server takes no backups")
	}
	// As long as the log is: exempt from the read and write timeouts.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=jetplane-%s.backup", time.Now().UTC().Format("20060102T150405Z")))
	s.cfg.Logger.Info("backup started", "actor", actor)
	// Once bytes are sent the status is 200: a failure later shows as a
	// short file, which Restore refuses.
	if err := s.cfg.Backup(r.Context(), w); err != nil {
		s.cfg.Logger.Error("backup failed", "err", err)
		return err
	}
	return nil
}

// Backup writes an online backup of the log and the chart store to w.
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/v1/backup", nil, nil, nil, w)
}
