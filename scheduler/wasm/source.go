package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jetplane/jetplane/events"
)

// Args are a WebAssembly plugin's pluginConfig args. The first three are
// upstream's PluginConfig (guestURL, guestConfig, logSeverity), so its
// KubeSchedulerConfiguration loads unchanged; the rest are jetplane's.
// An unknown key is an error that names it.
type Args struct {
	// GuestURL is where the module is: file://PATH (relative paths
	// allowed, as upstream reads them) or http(s)://…, fetched once at
	// load; the plugin's version is the fetched module's digest.
	GuestURL string `json:"guestURL,omitempty"`
	// GuestConfig is handed to the guest by get_config.
	GuestConfig string `json:"guestConfig,omitempty"`
	// LogSeverity drops the guest's klog lines below it: 0 info (default),
	// 1 warning, 2 error, 3 fatal.
	LogSeverity int32 `json:"logSeverity,omitempty"`

	// GuestDigest, when set, pins the module: "sha256:<hex>" that the
	// bytes fetched must match.
	GuestDigest string `json:"guestDigest,omitempty"`
	// GuestPath is the module file (same as a file:// guestURL); Image, in
	// its place, a module in jetplane's image store: NAME:TAG or
	// NAME@sha256:<hex> (the plugin must come from RegistryWithImages).
	GuestPath string `json:"guestPath,omitempty"`
	Image     string `json:"image,omitempty"`
	// Timeout bounds one call (default 1s).
	Timeout string `json:"timeout,omitempty"`
	// MemoryLimitPages bounds an instance's memory in 64 KiB pages
	// (default 2048: 128 MiB).
	MemoryLimitPages uint32 `json:"memoryLimitPages,omitempty"`
	// CacheDir holds compiled modules (default: the user cache dir).
	CacheDir string `json:"cacheDir,omitempty"`
}

// ParseArgs decodes args strictly: an unknown key is an error naming it.
func ParseArgs(raw json.RawMessage) (Args, error) {
	var a Args
	if len(raw) == 0 || string(raw) == "null" {
		return a, errors.New("args: guestURL is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("args: %w", err)
	}
	if a.LogSeverity < severityInfo || a.LogSeverity > severityFatal {
		return a, fmt.Errorf("args: logSeverity: %d is not 0 (info), 1 (warning), 2 (error) or 3 (fatal)", a.LogSeverity)
	}
	n := 0
	for _, s := range []string{a.GuestURL, a.GuestPath, a.Image} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return a, errors.New("args: exactly one of guestURL, guestPath and image is required")
	}
	return a, nil
}

// httpClient fetches http(s) guestURLs (a test swaps it for one that
// trusts its server).
var httpClient = &http.Client{Timeout: time.Minute}

// maxModuleBytes bounds a fetched module.
const maxModuleBytes = events.DefaultMaxImageBytes

// module reads the guest's code from its URL, file or image store, and
// checks it against GuestDigest when set; it returns the code and its
// digest.
func module(ctx context.Context, a Args, images ImageSource) ([]byte, string, error) {
	var code []byte
	var err error
	switch {
	case a.GuestURL != "":
		code, err = getURL(ctx, a.GuestURL)
		if err != nil {
			return nil, "", fmt.Errorf("guestURL %s: %w", a.GuestURL, err)
		}
	case a.GuestPath != "":
		if code, err = os.ReadFile(a.GuestPath); err != nil {
			return nil, "", fmt.Errorf("guestPath: %w", err)
		}
	case images == nil:
		return nil, "", fmt.Errorf("image %s: this scheduler has no image store", a.Image)
	default:
		digest, _, err := images.Resolve(ctx, a.Image)
		if err != nil {
			return nil, "", err
		}
		var buf bytes.Buffer
		if err := images.Fetch(ctx, digest, &buf, maxModuleBytes); err != nil {
			return nil, "", err
		}
		if got := digestOf(buf.Bytes()); got != digest {
			return nil, "", fmt.Errorf("image %s: the stored module's digest is %s, not %s", a.Image, got, digest)
		}
		code = buf.Bytes()
	}
	digest := digestOf(code)
	if a.GuestDigest != "" && a.GuestDigest != digest {
		return nil, "", fmt.Errorf("guestDigest: the module's digest is %s, not %s", digest, a.GuestDigest)
	}
	return code, digest, nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// getURL reads a file:// or http(s):// URL as upstream does: file://PATH
// is the path after the scheme, relative or absolute.
func getURL(ctx context.Context, url string) ([]byte, error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return nil, fmt.Errorf("invalid URL %q: want file://PATH or https://HOST/PATH", url)
	}
	switch scheme {
	case "file":
		return os.ReadFile(rest)
	case "http", "https":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("received %v status code from %q", resp.StatusCode, url)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxModuleBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxModuleBytes {
			return nil, fmt.Errorf("module is larger than %d bytes", maxModuleBytes)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unsupported URL scheme %q: want file or https", scheme)
}
