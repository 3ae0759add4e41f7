package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/scheduler"
)

// upstreamConfig is upstream's KubeSchedulerConfiguration for a WASM
// plugin (its README and e2e configs), with the guest at url.
func upstreamConfig(url, extra string) string {
	return `kind: KubeSchedulerConfiguration
apiVersion: kubescheduler.config.k8s.io/v1
profiles:
  - plugins:
      multiPoint:
        enabled:
          - name: NodeNumber
    pluginConfig:
      - name: NodeNumber
        args:
          guestURL: "` + url + `"
          guestConfig: '{"reverse": false}'
          logSeverity: 0
` + extra
}

func closeProfiles(profiles map[string]*scheduler.Profile) {
	for _, p := range profiles {
		for _, s := range p.Score {
			if c, ok := s.Plugin.(Closer); ok {
				c.Close()
			}
		}
	}
}

// TestUpstreamConfigLoadsUnchanged: upstream's configuration, any plugin
// name, guestURL file://; unknown args keys and bad values are errors
// naming the field.
func TestUpstreamConfigLoadsUnchanged(t *testing.T) {
	cfg, err := scheduler.ParseConfig([]byte(upstreamConfig("file://"+guestPath(t, "upstream"), "")))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	profiles, err := cfg.Build(Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer closeProfiles(profiles)
	prof := profiles[scheduler.DefaultSchedulerName]
	if v := prof.Versions()["NodeNumber"]; !strings.HasPrefix(v, "wasm/sha256:") {
		t.Fatalf("NodeNumber version %q", v)
	}
	snap := nodesNamed("n0", "n1", "n2", "n3")
	for _, pod := range []string{"p1", "p2", "p3"} {
		d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, 1), podNamed(pod), 0)
		if d.Node != "n"+pod[1:] {
			t.Fatalf("%s on %q: %s", pod, d.Node, d.Message())
		}
	}
	for _, tc := range []struct{ args, want string }{
		{`{guestURL: "file://` + guestPath(t, "upstream") + `", guestConfg: x}`, `unknown field "guestConfg"`},
		{`{guestURL: "file://` + guestPath(t, "upstream") + `", logSeverity: 7}`, "logSeverity: 7"},
		{`{guestURL: "ftp://x/y.wasm"}`, `unsupported URL scheme "ftp"`},
		{`{guestURL: "file:///nonexistent.wasm"}`, "no such file"},
		{`{guestURL: "file://` + guestPath(t, "upstream") + `", guestDigest: "sha256:00"}`, "guestDigest: the module's digest is sha256:"},
	} {
		c := "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: P}]\n  pluginConfig:\n  - name: P\n    args: " + tc.args + "\n"
		cfg, err := scheduler.ParseConfig([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Build(Registry()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %s: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestGuestURLHTTPS: an https guestURL is fetched once, at load, and the
// plugin's version is the fetched module's digest; guestDigest pins it.
func TestGuestURLHTTPS(t *testing.T) {
	code, err := os.ReadFile(guestPath(t, "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/nodenumber.wasm" {
			http.NotFound(w, r)
			return
		}
		w.Write(code)
	}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("server at %s", srv.URL)
	}
	prev := httpClient
	httpClient = srv.Client()
	defer func() { httpClient = prev }()

	extra := "          guestDigest: " + digestOf(code) + "\n"
	cfg, err := scheduler.ParseConfig([]byte(upstreamConfig(srv.URL+"/nodenumber.wasm", extra)))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	profiles, err := cfg.Build(Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer closeProfiles(profiles)
	prof := profiles[scheduler.DefaultSchedulerName]
	if v := prof.Versions()["NodeNumber"]; v != "wasm/"+digestOf(code)[:len("sha256:")+16] {
		t.Fatalf("version %q", v)
	}
	for i := 0; i < 3; i++ {
		if d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(nodesNamed("n0", "n2"), uint64(i+1)), podNamed("p2"), 0); d.Node != "n2" {
			t.Fatalf("p2 on %q", d.Node)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("module fetched %d times, want once", n)
	}
	cfg, _ = scheduler.ParseConfig([]byte(upstreamConfig(srv.URL+"/missing.wasm", "")))
	if _, err := cfg.Build(Registry()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing module: %v", err)
	}
}

// TestSDKImportsAreUpstreams: a module built with scheduler/guest imports
// only functions upstream's host exports (HostFunctions, at
// UpstreamCommit), with the same signatures, and WASI; and it exports
// upstream's filter and score with upstream's signatures. So it loads
// under upstream's host as under this one.
func TestSDKImportsAreUpstreams(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, name := range []string{"labelfilter", "nodenumber", "trap"} {
		code, err := os.ReadFile(guestPath(t, name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := rt.CompileModule(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.ImportedFunctions() {
			mod, fn, _ := f.Import()
			if mod == wasi_snapshot_preview1.ModuleName {
				continue
			}
			i := slices.IndexFunc(HostFunctions, func(h HostFunction) bool { return h.Module == mod && h.Name == fn })
			if i < 0 {
				t.Errorf("%s imports %s.%s, which upstream's host lacks", name, mod, fn)
				continue
			}
			h := HostFunctions[i]
			if fmt.Sprint(f.ParamTypes()) != fmt.Sprint(h.Params) || fmt.Sprint(f.ResultTypes()) != fmt.Sprint(h.Results) {
				t.Errorf("%s imports %s.%s as %v → %v, upstream's is %v → %v", name, mod, fn, f.ParamTypes(), f.ResultTypes(), h.Params, h.Results)
			}
		}
		for _, ex := range []string{exFilter, exScore} {
			f := m.ExportedFunctions()[ex]
			if f == nil || len(f.ParamTypes()) != 0 || len(f.ResultTypes()) != 1 || f.ResultTypes()[0] != guestExports[ex] {
				t.Errorf("%s: export %s is %v, want () -> %v", name, ex, f, guestExports[ex])
			}
		}
	}
}

// TestReplayWithUpstreamGuest: explain --replay's path (scheduler.Replay
// from the log, profiles built from the same upstream-shaped config)
// reaches the recorded decisions of an upstream-shaped guest.
func TestReplayWithUpstreamGuest(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	build := func() map[string]*scheduler.Profile {
		cfg, err := scheduler.ParseConfig([]byte(upstreamConfig("file://"+guestPath(t, "upstream"), "")))
		if err != nil {
			t.Fatal(err)
		}
		profiles, err := cfg.Build(Registry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeProfiles(profiles) })
		return profiles
	}
	c := newCluster(t, build(), slog.New(slog.DiscardHandler))
	c.applyNodes("n1", "n2", "n3")
	var keys []projections.Key
	for i := 1; i <= 6; i++ {
		name := fmt.Sprintf("p%d", i)
		if _, err := c.sched.Schedule(c.ctx, c.applyPod(name)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, projections.Key{Kind: "Pod", Namespace: "default", Name: name})
	}
	bound := c.waitBound(keys)
	for _, k := range keys[:3] {
		if want := "n" + k.Name[1:]; bound[k] != want {
			t.Fatalf("%s on %s, want %s", k.Name, bound[k], want)
		}
	}
	replayed := build()
	for _, k := range keys {
		rec, d := c.replay(k, replayed)
		if diff := scheduler.Differences(rec, d); len(diff) > 0 {
			t.Fatalf("%s: replay differs: %s", k, strings.Join(diff, "; "))
		}
	}
}

func (c *cluster) waitBound(keys []projections.Key) map[projections.Key]string {
	c.t.Helper()
	out := map[projections.Key]string{}
	for _, k := range keys {
		waitUntil(c.t, k.Name+" bound", func() bool {
			n := c.store.Get(k).GetSpec().GetFields()["nodeName"].GetStringValue()
			out[k] = n
			return n != ""
		})
	}
	return out
}

// replay reads what explain --replay reads, from the log.
func (c *cluster) replay(key projections.Key, profiles map[string]*scheduler.Profile) (*scheduler.RecordedDecision, *scheduler.Decision) {
	t := c.t
	t.Helper()
	ctx := context.Background()
	rec, d, err := scheduler.ReplayFromLog(ctx, c.log, key, profiles)
	if err != nil {
		t.Fatal(err)
	}
	return rec, d
}

// TestSDKGuestStartsLikeUpstream: a module built with scheduler/guest,
// given a _start by cmd/wasmstart, starts as upstream's host starts a
// guest (only _start runs) and filters.
func TestSDKGuestStartsLikeUpstream(t *testing.T) {
	code, err := os.ReadFile(guestPath(t, "labelfilter"))
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/labelfilter.wasm"
	if err := os.WriteFile(path, code, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "run", "../guest/cmd/wasmstart", path).CombinedOutput(); err != nil {
		t.Fatalf("wasmstart: %v\n%s", err, out)
	}
	a := args(t, "labelfilter")
	a.GuestPath = path
	pl, err := Load(context.Background(), "labelfilter", a)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.(*Plugin).Close()
	if p := pl.(*Plugin); p.start != "_start" {
		t.Fatalf("start function %q, want _start", p.start)
	}
	prof := &scheduler.Profile{Name: "p"}
	prof.AddPlugin(pl, 1)
	snap := scheduler.NewSnapshot(1, []*scheduler.NodeInfo{
		scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"zone": "1"}}}, 1),
		scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"zone": "2"}}}, 1),
	})
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d"}, Spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "2"}}})
	if d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, 1), pod, 0); d.Node != "b" {
		t.Fatalf("node %q: %s", d.Node, d.Message())
	}
}
