package helmrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/jetplane/jetplane/internal/render"
)

// Dependencies is what a chart's missing dependencies were fetched into:
// each packaged subchart, as `helm dependency build` would have put it in
// charts/.
type Dependencies struct {
	// Archives are the packaged subcharts fetched from repositories, in
	// Chart.yaml's order (file:// ones are read, not fetched).
	Archives [][]byte
	// Versions name every dependency added, "name version" each.
	Versions []string
}

// Vendor fetches, with client, the dependencies c's Chart.yaml names that
// its charts/ directory lacks, from the http(s) repository each names, and
// adds them to c as subcharts: what `helm dependency build` followed by
// helm install does. A Chart.lock pins each version (and must agree with
// Chart.yaml, as helm requires); without one the highest version matching
// the constraint wins. Dependencies whose repository jetplane cannot reach
// by itself (a name given by `helm repo add`, oci://, none) are
// refused with helm's message, as is one whose repository fails, with the
// repository's error.
//
// It is for `jetplane template`; the HelmRelease reconciler does the same
// with its repository cache. A nil client is one with a 30-second timeout.
//
// dir is the chart's directory when it was read from one: a file://
// repository, relative to it, is the directory or archive of the
// dependency, as helm dependency build reads it. Without dir (a packaged
// chart, a release's chart) file:// is refused.
func Vendor(ctx context.Context, client *http.Client, c *chart.Chart, dir string) (Dependencies, error) {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	deps, _, err := vendor(ctx, &repository{client: client}, c, dir)
	return deps, err
}

// errLockOutOfSync is helm's refusal of a Chart.lock written for other
// dependencies.
var (
	errLockOutOfSync         = errors.New("the lock file (Chart.lock) is out of sync with the dependencies file (Chart.yaml). Please update the dependencies")
	errRequirementsOutOfSync = errors.New("the lock file (requirements.lock) is out of sync with the dependencies file (requirements.yaml). Please update the dependencies")
)

// vendor is Vendor with repo; retry says the error is a repository's
// failure to answer, which may pass, not the chart's.
func vendor(ctx context.Context, repo *repository, c *chart.Chart, dir string) (_ Dependencies, retry bool, _ error) {
	var out Dependencies
	missing := render.MissingDependencies(c)
	if len(missing) == 0 {
		return out, false, nil
	}
	pinned, err := lockedVersions(c)
	if err != nil {
		return out, false, &render.Error{Template: lockFile(c), Reason: err.Error()}
	}
	var unreachable []*chart.Dependency
	var why []string
	added := map[string]bool{}
	for _, d := range missing {
		if added[d.Name] {
			continue // the same chart under another alias: fetched once, as charts/ holds it once
		}
		if local, ok := strings.CutPrefix(d.Repository, "file://"); ok && dir != "" {
			sub, err := localDependency(dir, local, d)
			if err != nil {
				unreachable = append(unreachable, d)
				why = append(why, fmt.Sprintf("%s: %v", d.Name, err))
				continue
			}
			c.AddDependency(sub)
			added[d.Name] = true
			out.Versions = append(out.Versions, d.Name+" "+sub.Metadata.Version)
			continue
		}
		if !strings.HasPrefix(d.Repository, "http://") && !strings.HasPrefix(d.Repository, "https://") {
			unreachable = append(unreachable, d)
			switch {
			case d.Repository == "":
				why = append(why, d.Name+": no repository; vendor it into charts/ with helm dependency build")
			default:
				why = append(why, fmt.Sprintf("%s: repository %q is not an http(s) URL jetplane can fetch from; vendor it with helm dependency build, or name the repository by its URL", d.Name, d.Repository))
			}
			continue
		}
		version := d.Version
		if v, ok := pinned[d.Name]; ok {
			version = v
		}
		if version == "" {
			version = "*" // helm: no version is any version
		}
		if _, err := semver.NewConstraint(version); err != nil {
			unreachable = append(unreachable, d)
			why = append(why, fmt.Sprintf("%s: version %q: %v", d.Name, version, err))
			continue
		}
		archive, got, err := repo.fetch(ctx, d.Repository, d.Name, version)
		if err == nil {
			var sub *chart.Chart
			if sub, err = render.Load(archive); err == nil && sub.Name() != d.Name {
				err = fmt.Errorf("the archive of %s %s holds chart %q", d.Name, got, sub.Name())
			}
			if err == nil {
				c.AddDependency(sub)
				added[d.Name] = true
				out.Archives = append(out.Archives, archive)
				out.Versions = append(out.Versions, d.Name+" "+got)
				continue
			}
		}
		if errors.Is(err, render.ErrTooLarge) {
			// The chart's own fault, not the repository's: no retry helps.
			return out, false, fmt.Errorf("dependency %s from %s: %w", d.Name, d.Repository, err)
		}
		retry = true
		unreachable = append(unreachable, d)
		if !strings.Contains(err.Error(), d.Repository) {
			err = fmt.Errorf("repository %s: %w", d.Repository, err)
		}
		why = append(why, fmt.Sprintf("fetching %s %s: %v", d.Name, version, err))
	}
	if len(unreachable) > 0 {
		return out, retry, render.DependencyError(unreachable, strings.Join(why, "; "))
	}
	return out, false, nil
}

// localDependency loads d from path (a file:// repository: a chart
// directory or archive, relative to the chart's directory dir) and checks
// its version against d's constraint, as helm dependency build does.
func localDependency(dir, path string, d *chart.Dependency) (*chart.Chart, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	sub, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("file://%s: %w", path, err)
	}
	if sub.Name() != d.Name {
		return nil, fmt.Errorf("file://%s holds chart %q", path, sub.Name())
	}
	if d.Version != "" {
		constraint, err := semver.NewConstraint(d.Version)
		if err != nil {
			return nil, fmt.Errorf("version %q: %v", d.Version, err)
		}
		v, err := semver.NewVersion(sub.Metadata.Version)
		if err != nil || !constraint.Check(v) {
			return nil, fmt.Errorf("file://%s holds version %s, not %s", path, sub.Metadata.Version, d.Version)
		}
	}
	return sub, nil
}

// lockedVersions are the versions c's Chart.lock pins, by dependency name;
// a lock whose digest is not that of Chart.yaml's dependencies and its own
// is refused, as helm dependency build refuses it. A chart of apiVersion
// v1 (requirements.yaml and requirements.lock) may also carry the digest
// Helm 2 wrote, of the requirements alone, as helm accepts.
func lockedVersions(c *chart.Chart) (map[string]string, error) {
	if c.Lock == nil {
		return nil, nil
	}
	digest := func(v any) string {
		data, _ := json.Marshal(v) // of plain structs: cannot fail
		sum := sha256.Sum256(data)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	req := c.Metadata.Dependencies
	if digest([2][]*chart.Dependency{req, c.Lock.Dependencies}) != c.Lock.Digest {
		if c.Metadata.APIVersion != chart.APIVersionV1 {
			return nil, errLockOutOfSync
		}
		if digest(map[string][]*chart.Dependency{"dependencies": req}) != c.Lock.Digest {
			return nil, errRequirementsOutOfSync
		}
	}
	out := map[string]string{}
	for _, d := range c.Lock.Dependencies {
		if d != nil {
			out[d.Name] = d.Version
		}
	}
	return out, nil
}

// lockFile is the name of c's lock file.
func lockFile(c *chart.Chart) string {
	if c.Metadata.APIVersion == chart.APIVersionV1 {
		return "requirements.lock"
	}
	return "Chart.lock"
}
