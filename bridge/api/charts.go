package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/render"
)

// ChartStore keeps packaged Helm charts (events.Charts).
type ChartStore interface {
	Put(ctx context.Context, name, version string, archive []byte) error
}

var _ ChartStore = (*events.Charts)(nil)

// ChartResponse answers a chart push.
type ChartResponse struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Bytes   int    `json:"bytes"`
}

// putChart stores a packaged chart (.tgz body) as NAME:VERSION, after
// checking that it is within the size limit and loads as a chart.
func (s *Server) putChart(w http.ResponseWriter, r *http.Request, actor string) error {
	if s.cfg.Charts == nil {
		return httpError(http.StatusNotImplemented, "this server keeps no charts")
	}
	name, version := r.PathValue("name"), r.PathValue("version")
	if err := authorizeArtifact(r.Context(), gate.VerbPushChart, name+":"+version); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return httpError(http.StatusBadRequest, fmt.Sprintf("chart name %q: %v", name, errs))
	}
	if _, err := semver.StrictNewVersion(version); err != nil {
		return httpError(http.StatusBadRequest, fmt.Sprintf("chart version %q: not a semantic version (such as 1.2.3): %v", version, err))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, render.MaxChartBytes+1))
	if err != nil {
		return err
	}
	if len(body) > render.MaxChartBytes {
		return httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("chart is over %d bytes packaged; keep large files out of charts", render.MaxChartBytes))
	}
	if _, err := render.Load(body); err != nil {
		return httpError(http.StatusBadRequest, err.Error())
	}
	if err := s.cfg.Charts.Put(r.Context(), name, version, body); err != nil {
		if errors.Is(err, events.ErrExists) {
			return httpError(http.StatusConflict, err.Error())
		}
		return err
	}
	s.cfg.Logger.Info("chart pushed", "chart", name+":"+version, "bytes", len(body), "actor", actor)
	return writeJSON(w, ChartResponse{Name: name, Version: version, Bytes: len(body)})
}

// PushChart stores a packaged chart (.tgz) as name:version.
func (c *Client) PushChart(ctx context.Context, name, version string, archive []byte) (*ChartResponse, error) {
	var out ChartResponse
	path := "/v1/charts/" + url.PathEscape(name) + "/" + url.PathEscape(version)
	hdr := http.Header{"Content-Type": {"application/gzip"}}
	return &out, c.do(ctx, http.MethodPut, path, nil, bytes.NewReader(archive), hdr, &out)
}
