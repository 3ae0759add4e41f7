//go:build unix

package kubeenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// CacheEnv names the environment variable that overrides the directory
// holding built binaries (default: the user cache dir + jetplane/testenv).
const CacheEnv = "JETPLANE_TESTENV_CACHE"

// mainModule is the module whose source tree holds the tools modules.
const mainModule = "github.com/jetplane/jetplane"

// A binary is one program built from a tools module under internal/tools.
// Its version is read from that module's go.mod, so go.mod is the only place
// a version is written.
type binary struct {
	name      string // file name prefix in the cache
	toolsDir  string // directory under internal/tools
	module    string // module whose version names the binary
	pkg       string // main package to build
	buildTime string // what a cold build took here, for the log line
	// ldflags returns the linker flags for version v.
	ldflags func(v string) string
}

var (
	apiserverBinary = binary{
		name:      "kube-apiserver",
		toolsDir:  "kubebin",
		module:    "k8s.io/kubernetes",
		pkg:       "k8s.io/kubernetes/cmd/kube-apiserver",
		buildTime: "about 5 minutes on two cores",
		// Without these /version reports v0.0.0-master.
		ldflags: func(v string) string {
			major, minor, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
			minor, _, _ = strings.Cut(minor, ".")
			const p = "k8s.io/component-base/version."
			return fmt.Sprintf("-s -w -X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean",
				p, v, p, major, p, minor, p)
		},
	}
	kubectlBinary = binary{
		name:      "kubectl",
		toolsDir:  "kubectlbin",
		module:    "k8s.io/kubernetes",
		pkg:       "k8s.io/kubernetes/cmd/kubectl",
		buildTime: "about 3 minutes on two cores",
		// kubectl version reads client-go's copy of the version.
		ldflags: func(v string) string {
			major, minor, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
			minor, _, _ = strings.Cut(minor, ".")
			var flags []string
			for _, p := range []string{"k8s.io/component-base/version.", "k8s.io/client-go/pkg/version."} {
				flags = append(flags, fmt.Sprintf("-X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean",
					p, v, p, major, p, minor, p))
			}
			return "-s -w " + strings.Join(flags, " ")
		},
	}
	etcdBinary = binary{
		name:      "etcd",
		toolsDir:  "etcdbin",
		module:    "go.etcd.io/etcd/server/v3",
		pkg:       "go.etcd.io/etcd/server/v3",
		buildTime: "about a minute on two cores",
		ldflags:   func(string) string { return "-s -w" },
	}
)

// Binaries holds the paths of built, cached binaries.
type Binaries struct {
	APIServer string
	Etcd      string
}

// EnsureBinaries returns the cached kube-apiserver and etcd, building each
// that is missing. A build runs under an exclusive file lock, so concurrent
// test processes build each binary once; the result is renamed into place,
// so a binary in the cache is always complete. logf reports builds and
// waits; it may be nil.
func EnsureBinaries(ctx context.Context, logf func(format string, args ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var bins Binaries
	var err error
	if bins.Etcd, err = etcdBinary.ensure(ctx, logf); err != nil {
		return Binaries{}, err
	}
	if bins.APIServer, err = apiserverBinary.ensure(ctx, logf); err != nil {
		return Binaries{}, err
	}
	return bins, nil
}

// EnsureKubectl returns the cached kubectl, built from the kubernetes
// release internal/tools/kubectlbin pins (the test kube-apiserver's), the
// first time on a machine as EnsureBinaries builds its binaries.
func EnsureKubectl(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return kubectlBinary.ensure(ctx, logf)
}

// cached reports whether both binaries are in the cache already.
func cached() bool {
	for _, b := range []binary{etcdBinary, apiserverBinary} {
		path, _, _, err := b.cachePath()
		if err != nil || !isFile(path) {
			return false
		}
	}
	return true
}

// CacheDir returns the directory built binaries are kept in.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache dir (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(d, "jetplane", "testenv"), nil
}

// cachePath names b's binary by its version and a digest of everything that
// decides its content (the tools module's go.mod and go.sum, the link flags
// and the target), so changing any of them builds anew.
func (b binary) cachePath() (path, version, modDir string, err error) {
	root, err := sourceRoot()
	if err != nil {
		return "", "", "", err
	}
	modDir = filepath.Join(root, "internal", "tools", b.toolsDir)
	gomod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return "", "", "", err
	}
	gosum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return "", "", "", err
	}
	version = requiredVersion(gomod, b.module)
	if version == "" {
		return "", "", "", fmt.Errorf("%s/go.mod does not require %s", modDir, b.module)
	}
	h := sha256.New()
	for _, part := range [][]byte{gomod, gosum, []byte(b.ldflags(version)), []byte(runtime.GOOS + "/" + runtime.GOARCH)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	dir, err := CacheDir()
	if err != nil {
		return "", "", "", err
	}
	name := fmt.Sprintf("%s-%s-%s", b.name, version, hex.EncodeToString(h.Sum(nil))[:10])
	return filepath.Join(dir, name), version, modDir, nil
}

func (b binary) ensure(ctx context.Context, logf func(string, ...any)) (string, error) {
	path, version, modDir, err := b.cachePath()
	if err != nil {
		return "", fmt.Errorf("%s: %w", b.name, err)
	}
	if isFile(path) {
		used(path)
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(path+".lock", func() {
		logf("waiting for another process building %s %s", b.name, version)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if isFile(path) { // built while we waited
		return path, nil
	}
	// Holding the lock, a temp file left here is from a build that was
	// interrupted: overwrite it.
	tmp := path + ".tmp"
	logf("building %s %s into %s (first use on this machine; %s)", b.name, version, filepath.Dir(path), b.buildTime)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-trimpath",
		"-ldflags", b.ldflags(version), "-o", tmp, b.pkg)
	cmd.Dir = modDir
	// CGO off: a static binary that needs no C toolchain. GOWORK off: a
	// go.work in a parent directory must not change what is built.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s %s in %s: %w\n%s", b.name, version, modDir, err, tail(out, 30))
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	logf("built %s %s in %s", b.name, version, time.Since(start).Round(time.Second))
	prune(b.name, path, logf)
	return path, nil
}

// unusedFor is how long a cached build may go unused before a new build of
// the same binary removes it. Builds of other versions or tools modules
// (another checkout, an older branch) stay that long, so switching between
// them does not rebuild each time.
const unusedFor = 30 * 24 * time.Hour

// used marks a cached binary as just used (its modification time), for
// prune.
func used(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// prune removes cached builds of binary name other than keep that have not
// been used for unusedFor, with their lock files.
func prune(name, keep string, logf func(string, ...any)) {
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(keep), name+"-*"))
	for _, f := range others {
		if f == keep || filepath.Ext(f) == ".lock" || filepath.Ext(f) == ".tmp" {
			continue
		}
		info, err := os.Stat(f)
		if err != nil || time.Since(info.ModTime()) < unusedFor {
			continue
		}
		if err := os.Remove(f); err == nil {
			_ = os.Remove(f + ".lock")
			logf("removed %s, unused since %s", f, info.ModTime().Format(time.DateOnly))
		}
	}
}

// requiredVersion returns the version of module mod that go.mod requires,
// or "" if it does not.
func requiredVersion(gomod []byte, mod string) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) >= 2 && f[0] == mod && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	return ""
}

// sourceRoot finds jetplane's source tree from the working directory, which
// is the package directory under go test and the repository under go run.
func sourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePath(b) == mainModule {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside jetplane's source tree: run from the repository, which holds internal/tools")
		}
		dir = parent
	}
}

// modulePath returns the path on go.mod's module line.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
