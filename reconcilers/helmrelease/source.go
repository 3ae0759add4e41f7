package helmrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/internal/render"
)

// ErrChartNotFound means the chart or version named is not there.
var ErrChartNotFound = errors.New("chart not found")

// Charts is the store `jetplane chart push` writes to.
type Charts interface {
	// Get returns the packaged chart pushed as name:version, or an error
	// matching ErrChartNotFound.
	Get(ctx context.Context, name, version string) ([]byte, error)
}

// maxIndexBytes bounds a repository's index.yaml.
const maxIndexBytes = 16 << 20

// repoIndex is the part of a Helm repository's index.yaml jetplane reads.
type repoIndex struct {
	Entries map[string][]struct {
		Version string   `json:"version"`
		URLs    []string `json:"urls"`
		Digest  string   `json:"digest"`
	} `json:"entries"`
}

// repository fetches charts from Helm HTTP repositories, caching packaged
// charts by URL and digest (a chart version in a repository does not
// change; when its digest does, it is fetched again).
type repository struct {
	client *http.Client
	mu     sync.Mutex
	cache  map[string][]byte // chart URL + "@" + digest → archive
}

// fetch resolves name and version (an exact version or a semver range,
// the highest match wins) in the repository at base, and returns the
// packaged chart and the version chosen.
func (r *repository) fetch(ctx context.Context, base, name, version string) ([]byte, string, error) {
	base = strings.TrimSuffix(base, "/")
	data, err := r.get(ctx, base+"/index.yaml", maxIndexBytes)
	if err != nil {
		return nil, "", fmt.Errorf("repository %s: %w", base, err)
	}
	var idx repoIndex
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return nil, "", fmt.Errorf("repository %s: index.yaml: %v", base, err)
	}
	versions := idx.Entries[name]
	if len(versions) == 0 {
		return nil, "", fmt.Errorf("%w: repository %s has no chart %q", ErrChartNotFound, base, name)
	}
	constraint, err := semver.NewConstraint(version)
	if err != nil {
		return nil, "", fmt.Errorf("version %q: %v", version, err)
	}
	best := -1
	var bestV *semver.Version
	var have []string
	for i, cv := range versions {
		have = append(have, cv.Version)
		v, err := semver.NewVersion(cv.Version)
		if err != nil || !constraint.Check(v) {
			continue
		}
		if bestV == nil || v.GreaterThan(bestV) {
			best, bestV = i, v
		}
	}
	if best < 0 {
		slices.Sort(have)
		return nil, "", fmt.Errorf("%w: repository %s has no version %s of chart %s (it has %s)", ErrChartNotFound, base, version, name, strings.Join(have, ", "))
	}
	cv := versions[best]
	if len(cv.URLs) == 0 {
		return nil, "", fmt.Errorf("repository %s: chart %s %s has no URL", base, name, cv.Version)
	}
	u, err := url.Parse(cv.URLs[0])
	if err != nil {
		return nil, "", fmt.Errorf("repository %s: chart %s %s: url: %v", base, name, cv.Version, err)
	}
	b, _ := url.Parse(base + "/")
	chartURL := b.ResolveReference(u).String()
	key := chartURL + "@" + cv.Digest
	r.mu.Lock()
	cached, ok := r.cache[key]
	r.mu.Unlock()
	if ok && cv.Digest != "" {
		return cached, cv.Version, nil
	}
	archive, err := r.get(ctx, chartURL, render.MaxChartBytes)
	if err != nil {
		return nil, "", fmt.Errorf("chart %s %s: %w", name, cv.Version, err)
	}
	if cv.Digest != "" {
		sum := sha256.Sum256(archive)
		if got := hex.EncodeToString(sum[:]); got != cv.Digest {
			return nil, "", fmt.Errorf("chart %s %s from %s: digest %s does not match the index's %s", name, cv.Version, chartURL, got, cv.Digest)
		}
		r.mu.Lock()
		if r.cache == nil {
			r.cache = map[string][]byte{}
		}
		r.cache[key] = archive
		r.mu.Unlock()
	}
	return archive, cv.Version, nil
}

// get reads url, refusing bodies over limit.
func (r *repository) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: %w: over %d bytes", u, render.ErrTooLarge, limit)
	}
	return data, nil
}
