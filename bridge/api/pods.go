package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
)

// Pods is what the image and logs routes need.
type Pods interface {
	Images() *events.Images
	// ReadLogs and NewestLog read a pod's logs (events.NodeStore); the
	// query's Node is filled in with the node the pod is bound to.
	ReadLogs(ctx context.Context, q events.LogQuery, fn func(events.LogLine) error) error
	NewestLog(ctx context.Context, q events.LogQuery) ([]events.LogLine, error)
	// ImageInUse names the pods (namespace/name) that use the image ref
	// (or its digest).
	ImageInUse(ref, digest string) []string
	// MaxImageBytes bounds a push.
	MaxImageBytes() int64
}

// ImageInfo is one image tag, as the API lists it.
type ImageInfo struct {
	Ref    string    `json:"ref"`
	Digest string    `json:"digest"`
	Size   uint64    `json:"size"`
	Time   time.Time `json:"time"`
}

func (s *Server) podRoutes() {
	if s.cfg.Pods == nil {
		return
	}
	s.route("POST /v1/images", s.imagePush)
	s.route("GET /v1/images", s.imageList)
	s.route("GET /v1/images/resolve", s.imageResolve)
	s.route("GET /v1/images/module", s.imageModule)
	s.route("DELETE /v1/images", s.imageRemove)
	s.route("GET /v1/logs", s.logs)
}

func imageError(err error) error {
	switch {
	case errors.Is(err, events.ErrBadImage):
		return httpError(http.StatusBadRequest, err.Error())
	case errors.Is(err, events.ErrImageInUse):
		return httpError(http.StatusConflict, err.Error())
	case errors.Is(err, events.ErrNotFound):
		return httpError(http.StatusNotFound, err.Error())
	}
	return err
}

func (s *Server) imagePush(w http.ResponseWriter, r *http.Request, _ string) error {
	ref := r.URL.Query().Get("ref")
	if err := authorizeArtifact(r.Context(), gate.VerbPushImage, ref); err != nil {
		return err
	}
	max := s.cfg.Pods.MaxImageBytes()
	im, err := s.cfg.Pods.Images().Push(r.Context(), ref, r.Body, max)
	if err != nil {
		if !errors.Is(err, events.ErrBadImage) && strings.Contains(err.Error(), "image \"") {
			return httpError(http.StatusBadRequest, err.Error())
		}
		return imageError(err)
	}
	return writeJSON(w, ImageInfo(im))
}

func (s *Server) imageList(w http.ResponseWriter, r *http.Request, _ string) error {
	list, err := s.cfg.Pods.Images().List(r.Context())
	if err != nil {
		return err
	}
	out := make([]ImageInfo, len(list))
	for i, im := range list {
		out[i] = ImageInfo(im)
	}
	return writeJSON(w, out)
}

// imageResolve names the module a ref (NAME:TAG or NAME@sha256:…) stands
// for: its digest and size.
func (s *Server) imageResolve(w http.ResponseWriter, r *http.Request, _ string) error {
	ref := r.URL.Query().Get("ref")
	digest, size, err := s.cfg.Pods.Images().Resolve(r.Context(), ref)
	if err != nil {
		return imageError(err)
	}
	return writeJSON(w, ImageInfo{Ref: ref, Digest: digest, Size: size})
}

// imageModule sends the module stored under digest, as the node agents
// and WebAssembly plugins read it.
func (s *Server) imageModule(w http.ResponseWriter, r *http.Request, _ string) error {
	digest := r.URL.Query().Get("digest")
	if !strings.HasPrefix(digest, "sha256:") {
		return httpError(http.StatusBadRequest, fmt.Sprintf("digest: %q is not sha256:<hex>; resolve a ref with GET /v1/images/resolve", digest))
	}
	var buf bytes.Buffer
	if err := s.cfg.Pods.Images().Fetch(r.Context(), digest, &buf, s.cfg.Pods.MaxImageBytes()); err != nil {
		return imageError(err)
	}
	w.Header().Set("Content-Type", "application/wasm")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, err := w.Write(buf.Bytes())
	return err
}

func (s *Server) imageRemove(w http.ResponseWriter, r *http.Request, _ string) error {
	ref := r.URL.Query().Get("ref")
	if err := authorizeArtifact(r.Context(), gate.VerbDeleteImage, ref); err != nil {
		return err
	}
	if err := s.cfg.Pods.Images().Remove(r.Context(), ref, s.cfg.Pods.ImageInUse); err != nil {
		return imageError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// logs streams a pod's output as text: every stored line, or the last
// tail lines, of the current run or (previous) the run before; with
// follow, new lines as they come.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, _ string) error {
	q := r.URL.Query()
	lq := events.LogQuery{Namespace: q.Get("namespace"), Pod: q.Get("pod"), Container: q.Get("container"), Follow: q.Get("follow") == "true"}
	if lq.Namespace == "" {
		lq.Namespace = "default"
	}
	if lq.Pod == "" {
		return httpError(http.StatusBadRequest, "pod: required")
	}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return httpError(http.StatusBadRequest, fmt.Sprintf("since: %q is not a positive duration such as 10m", v))
		}
		lq.Since = time.Now().Add(-d)
	}
	tail := -1
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return httpError(http.StatusBadRequest, fmt.Sprintf("tail: %q is not a number of lines", v))
		}
		tail = n
	}
	previous := q.Get("previous") == "true"
	if previous && lq.Follow {
		return httpError(http.StatusBadRequest, "previous and follow do not go together: a previous run has ended")
	}
	// Which run is current is known from the newest chunk of each
	// container; the stored lines then stream, never held whole: a tail
	// starts that many chunks from the end (each chunk holds at least one
	// line) and keeps only the last tail lines.
	newest, err := s.cfg.Pods.NewestLog(r.Context(), lq)
	if err != nil {
		return err
	}
	want := -1
	var after uint64
	for _, l := range newest {
		want = max(want, l.Restart)
		after = max(after, l.Seq)
	}
	if previous {
		want--
		if want < 0 {
			return httpError(http.StatusBadRequest, "the pod has no previous run")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var ring [][]byte // the last tail lines, when tail >= 0
	if tail != 0 && len(newest) > 0 {
		stored := lq
		stored.Follow = false
		if tail > 0 && !previous {
			stored.Last = tail
		}
		var werr error
		if err := s.cfg.Pods.ReadLogs(r.Context(), stored, func(l events.LogLine) error {
			if l.Seq > after {
				return errStop // newer than the newest seen: the follow's
			}
			if l.Restart != want && (previous || !lq.Follow) {
				return nil
			}
			sc := bufio.NewScanner(bytes.NewReader(l.Data))
			sc.Buffer(make([]byte, 0, 4<<10), events.LogChunkBytes+1)
			for sc.Scan() {
				line := append(sc.Bytes(), '\n')
				if tail < 0 {
					if _, werr = w.Write(line); werr != nil {
						return werr
					}
					continue
				}
				if len(ring) == tail {
					ring = append(ring[:0], ring[1:]...)
				}
				ring = append(ring, bytes.Clone(line))
			}
			return nil
		}); err != nil && !errors.Is(err, errStop) {
			if werr != nil {
				return nil // the client went away
			}
			return err
		}
	}
	for _, t := range ring {
		if _, err := w.Write(t); err != nil {
			return nil
		}
	}
	if !lq.Follow {
		return nil
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	ctx, release := s.stream(w, r)
	defer release()
	lq.After = after
	err = s.cfg.Pods.ReadLogs(ctx, lq, func(l events.LogLine) error {
		if _, err := w.Write(l.Data); err != nil {
			return err
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// errStop ends a read early.
var errStop = errors.New("stop")

// PushImage uploads a module as ref (NAME:TAG).
func (c *Client) PushImage(ctx context.Context, ref string, module io.Reader, size int64) (*ImageInfo, error) {
	var out ImageInfo
	hdr := http.Header{"Content-Type": {"application/wasm"}}
	if size >= 0 {
		hdr.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	return &out, c.do(ctx, http.MethodPost, "/v1/images", url.Values{"ref": {ref}}, module, hdr, &out)
}

// Images lists the image tags.
func (c *Client) Images(ctx context.Context) ([]ImageInfo, error) {
	var out []ImageInfo
	return out, c.do(ctx, http.MethodGet, "/v1/images", nil, nil, nil, &out)
}

// ImageSource reads modules from jetplane's image store through the API:
// what a WebAssembly scheduler plugin named by image needs outside a
// jetplane process (placement --replay).
type ImageSource struct{ Client *Client }

// Resolve names the module ref stands for.
func (s ImageSource) Resolve(ctx context.Context, ref string) (string, uint64, error) {
	var out ImageInfo
	if err := s.Client.do(ctx, http.MethodGet, "/v1/images/resolve", url.Values{"ref": {ref}}, nil, nil, &out); err != nil {
		return "", 0, err
	}
	return out.Digest, out.Size, nil
}

// Fetch writes the module stored under digest to w, failing past max bytes.
func (s ImageSource) Fetch(ctx context.Context, digest string, w io.Writer, max int64) error {
	lw := &limitWriter{w: w, left: max}
	err := s.Client.do(ctx, http.MethodGet, "/v1/images/module", url.Values{"digest": {digest}}, nil, nil, lw)
	if lw.over {
		return fmt.Errorf("image %s: over %d bytes", digest, max)
	}
	return err
}

type limitWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.over = true
		return 0, errors.New("over the size limit")
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// RemoveImage removes a tag (and its module when no tag is left).
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodDelete, "/v1/images", url.Values{"ref": {ref}}, nil, nil, nil)
}

// LogsOptions selects a pod's output.
type LogsOptions struct {
	Namespace, Pod, Container string
	Follow, Previous          bool
	Since                     time.Duration
	Tail                      int // -1: all
}

// Logs copies a pod's output to w until it ends (or, following, until ctx
// ends).
func (c *Client) Logs(ctx context.Context, o LogsOptions, w io.Writer) error {
	q := url.Values{"namespace": {o.Namespace}, "pod": {o.Pod}}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Previous {
		q.Set("previous", "true")
	}
	if o.Since > 0 {
		q.Set("since", o.Since.String())
	}
	if o.Tail >= 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	err := c.do(ctx, http.MethodGet, "/v1/logs", q, nil, nil, w)
	if o.Follow && ctx.Err() != nil {
		return nil // following ends when the caller stops it
	}
	return err
}
