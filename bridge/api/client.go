package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to a jetplane API server. Safe for concurrent use.
type Client struct {
	// BaseURL is the server's address, such as http://127.0.0.1:7070.
	BaseURL string
	// Token is the bearer token, if the server requires one.
	Token string
	// ShowSecrets asks for secret values in clear (the token must allow it).
	ShowSecrets bool
	// PurgeSecretData makes Delete destroy the object's data keys too
	// (crypto-shredding; admins only).
	PurgeSecretData bool

	HTTP *http.Client
	// WatchRetry, when set, hears each failed watch connection and how
	// long Watch waits before it tries again, so a caller can say why
	// nothing arrives.
	WatchRetry func(err error, wait time.Duration)
}

// ErrUnreachable matches errors of requests that reached no server.
var ErrUnreachable = errors.New("server unreachable")

// defaultHTTP bounds the time to connect and to the first byte of an
// answer, so a server that is down or hung is an error, not a hang. Bodies
// may stream for as long as they last (watches).
var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   5 * time.Second,
	ResponseHeaderTimeout: 2 * time.Minute,
	// Enough to keep a connection open for each request a client sends
	// at once (a controller's workers, a pipeline's parallel applies):
	// one closed after every answer is a new connection for the next.
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}}

func unreachable(base string, err error) error {
	// The innermost cause says it best ("connection refused", "i/o
	// timeout"); the URL is already in the message.
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return fmt.Errorf("%w: cannot reach the jetplane server at %s (%v); is `jetplane serve` running there? Set the address with --server or JETPLANE_SERVER", ErrUnreachable, base, err)
}

// APIError is an error answered by the server.
type APIError struct {
	Code int
	ErrorResponse
}

func (e *APIError) Error() string { return e.ErrorResponse.Error }

// Query narrows lists and watches; empty fields match everything.
type Query struct {
	Kind, Namespace, Group, LabelSelector string
	// FieldSelector selects on metadata.name, metadata.namespace and
	// status.phase (=, ==, !=, comma-separated).
	FieldSelector string
}

func (q Query) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"kind": q.Kind, "namespace": q.Namespace, "group": q.Group, "labelSelector": q.LabelSelector, "fieldSelector": q.FieldSelector} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func keyValues(k Key) url.Values {
	v := url.Values{"kind": {k.Kind}, "name": {k.Name}}
	if k.Namespace != "" {
		v.Set("namespace", k.Namespace)
	}
	return v
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, hdr http.Header, out any) error {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if c.ShowSecrets || (c.PurgeSecretData && method == http.MethodDelete) {
		q = cloneValues(q)
		if c.ShowSecrets {
			q.Set(showSecretsParam, "true")
		}
		if c.PurgeSecretData && method == http.MethodDelete {
			q.Set(purgeParam, "true")
		}
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unreachable(c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	switch o := out.(type) {
	case *json.RawMessage:
		*o, err = io.ReadAll(resp.Body)
		return err
	case io.Writer:
		// A body that streams (a backup, logs followed): copied as it
		// comes, until it ends or ctx does (an error: the copy is cut).
		_, err = io.Copy(o, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return err
	}
	// Read what follows the value (its newline), so the connection is
	// used again rather than closed with unread bytes.
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return err
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{Code: resp.StatusCode}
	if json.Unmarshal(data, &e.ErrorResponse) != nil || e.ErrorResponse.Error == "" {
		e.ErrorResponse.Error = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return e
}

// Apply sends manifests (YAML or JSON, several documents allowed). source
// names them in error messages; idempotencyKey may be empty.
func (c *Client) Apply(ctx context.Context, source string, manifests []byte, idempotencyKey string) (*ApplyResponse, error) {
	return c.apply(ctx, source, manifests, idempotencyKey, false)
}

// ApplyBrief is Apply asking for the brief answer (Prefer:
// return=minimal): each result has the key, the action and the
// resourceVersion, not the object; for bulk clients.
func (c *Client) ApplyBrief(ctx context.Context, source string, manifests []byte, idempotencyKey string) (*ApplyResponse, error) {
	return c.apply(ctx, source, manifests, idempotencyKey, true)
}

func (c *Client) apply(ctx context.Context, source string, manifests []byte, idempotencyKey string, brief bool) (*ApplyResponse, error) {
	hdr := http.Header{"Content-Type": {"application/yaml"}}
	if brief {
		hdr.Set("Prefer", "return=minimal")
	}
	if idempotencyKey != "" {
		hdr.Set("Idempotency-Key", idempotencyKey)
	}
	var out ApplyResponse
	q := url.Values{}
	if source != "" {
		q.Set("source", source)
	}
	return &out, c.do(ctx, http.MethodPost, "/v1/apply", q, bytes.NewReader(manifests), hdr, &out)
}

// Get returns one object as JSON.
func (c *Client) Get(ctx context.Context, k Key) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, "/v1/object", keyValues(k), nil, nil, &raw)
}

// List returns the objects matching q, every page of them; the
// ResourceVersion is the first page's (a watch from it misses nothing).
func (c *Client) List(ctx context.Context, q Query) (*ListResponse, error) {
	return c.listPages(ctx, "/v1/objects", q.values())
}

// listPages reads every page of a list at path; the ResourceVersion is the
// first page's.
func (c *Client) listPages(ctx context.Context, path string, v url.Values) (*ListResponse, error) {
	var out ListResponse
	for first := true; ; first = false {
		var page ListResponse
		if err := c.do(ctx, http.MethodGet, path, v, nil, nil, &page); err != nil {
			return &out, err
		}
		if first {
			out.ResourceVersion = page.ResourceVersion
		}
		out.Items = append(out.Items, page.Items...)
		if page.Continue == "" {
			if out.Items == nil {
				out.Items = []json.RawMessage{}
			}
			return &out, nil
		}
		v.Set("continue", page.Continue)
	}
}

// Delete requests deletion of one object.
func (c *Client) Delete(ctx context.Context, k Key) (*ApplyResponse, error) {
	var out ApplyResponse
	return &out, c.do(ctx, http.MethodDelete, "/v1/object", keyValues(k), nil, nil, &out)
}

// History returns every event of one key, every page of them.
func (c *Client) History(ctx context.Context, k Key) (*HistoryResponse, error) {
	var out HistoryResponse
	v := keyValues(k)
	for {
		var page HistoryResponse
		if err := c.do(ctx, http.MethodGet, "/v1/history", v, nil, nil, &page); err != nil {
			return &out, err
		}
		out.Events = append(out.Events, page.Events...)
		if page.Continue == "" {
			return &out, nil
		}
		v.Set("continue", page.Continue)
	}
}

// StateAt returns the objects matching q as of at: a sequence number or an
// RFC 3339 time.
func (c *Client) StateAt(ctx context.Context, at string, q Query) (*ListResponse, error) {
	v := q.values()
	v.Set("at", at)
	return c.listPages(ctx, "/v1/state", v)
}

// Clusters lists the Kubernetes clusters the server's bridge watches.
func (c *Client) Clusters(ctx context.Context) (*ClustersResponse, error) {
	var out ClustersResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/clusters", nil, nil, nil, &out)
}

// Watch streams changes matching q after resourceVersion from (0: the
// current objects first) to fn until ctx ends or fn returns an error. When
// the stream breaks it resumes from the last resourceVersion seen.
func (c *Client) Watch(ctx context.Context, q Query, from uint64, fn func(WatchEvent) error) error {
	return c.resume(ctx, true, func() error { return c.watchOnce(ctx, q, &from, fn) })
}

// resume runs one stream after another until ctx ends, fn's handler stops
// it, the server refuses it, or (without follow) one ends cleanly; a
// network error is reported to WatchRetry and retried after a second.
// Each stream resumes from what the one before it delivered.
func (c *Client) resume(ctx context.Context, follow bool, stream func() error) error {
	for {
		err := stream()
		var apiErr *APIError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &apiErr), errors.Is(err, errStopWatch):
			return err
		case err == nil && !follow:
			return nil
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			// A network error: retry after a pause, as the stream would.
			if c.WatchRetry != nil {
				c.WatchRetry(err, time.Second)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
}

// openStream GETs path with v as a long-lived stream: a refusal is an
// *APIError, and the caller closes the body.
func (c *Client) openStream(ctx context.Context, path string, v url.Values, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path+"?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, unreachable(c.BaseURL, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

var errStopWatch = errors.New("watch stopped by handler")

func (c *Client) watchOnce(ctx context.Context, q Query, from *uint64, fn func(WatchEvent) error) error {
	v := q.values()
	if *from > 0 {
		v.Set("resourceVersion", strconv.FormatUint(*from, 10))
	}
	if c.ShowSecrets {
		v.Set(showSecretsParam, "true")
	}
	resp, err := c.openStream(ctx, "/v1/watch", v, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var we WatchEvent
		if err := json.Unmarshal([]byte(data), &we); err != nil {
			return fmt.Errorf("watch: bad event: %w", err)
		}
		if err := fn(we); err != nil {
			return fmt.Errorf("%w: %w", errStopWatch, err)
		}
		*from = we.ResourceVersion
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// ApplyDryRun checks manifests as Apply would and reports what it would do,
// with each object as it would be stored and as it is now; nothing is
// written.
func (c *Client) ApplyDryRun(ctx context.Context, source string, manifests []byte) (*ApplyResponse, error) {
	q := url.Values{"dryRun": {"true"}}
	if source != "" {
		q.Set("source", source)
	}
	var out ApplyResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/apply", q, bytes.NewReader(manifests), http.Header{"Content-Type": {"application/yaml"}}, &out)
}

// DeleteOptions tune Delete.
type DeleteOptions struct {
	// Cascade is what deletion does to dependents: "background" (the
	// default), "foreground" (the object stays until its dependents are
	// gone) or "orphan" (its dependents lose their owner and stay; a
	// Namespace is deleted without its contents).
	Cascade string
}

// DeleteWith requests deletion of one object; a Namespace takes its
// contents with it unless opts.Cascade is "orphan".
func (c *Client) DeleteWith(ctx context.Context, k Key, opts DeleteOptions) (*ApplyResponse, error) {
	v := keyValues(k)
	if opts.Cascade != "" {
		v.Set("cascade", opts.Cascade)
	}
	var out ApplyResponse
	return &out, c.do(ctx, http.MethodDelete, "/v1/object", v, nil, nil, &out)
}

// Kinds lists the kinds the server knows by name.
func (c *Client) Kinds(ctx context.Context) (*KindsResponse, error) {
	var out KindsResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/kinds", nil, nil, nil, &out)
}

// Version describes the server and its log.
func (c *Client) Version(ctx context.Context) (*Version, error) {
	var out Version
	return &out, c.do(ctx, http.MethodGet, "/v1/version", nil, nil, nil, &out)
}

// Describe returns one object with its dependencies, dependents, last
// events and reconciler.
func (c *Client) Describe(ctx context.Context, k Key) (*DescribeResponse, error) {
	var out DescribeResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/describe", keyValues(k), nil, nil, &out)
}
