package security

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
)

// The sandbox tests run hostile modules on a node agent inside a real
// jetplane and check that the process is still serving, the host is
// untouched and each failure is the pod's own.

var (
	guestOnce sync.Once
	guestBin  []byte
	guestErr  error
)

// guest is testdata/guest built for WASI, once per test run.
func guest(t *testing.T) []byte {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jetplane-guest-")
		if err != nil {
			guestErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "guest.wasm")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/guest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := cmd.CombinedOutput(); err != nil {
			guestErr = fmt.Errorf("build guest: %v\n%s", err, msg)
			return
		}
		guestBin, guestErr = os.ReadFile(out)
	})
	if guestErr != nil {
		t.Fatal(guestErr)
	}
	return guestBin
}

// sandboxApp is jetplane with its local node agent "local" (its node
// directory the default one beside the data directory).
func sandboxApp(t *testing.T, mutate func(*app.Config)) (*app.App, *api.Client, string) {
	t.Helper()
	cfg := app.Config{DataDir: filepath.Join(t.TempDir(), "data")}
	cfg.Pods.Agent = pod.AgentConfig{Node: "local", Heartbeat: time.Second, Clock: pod.ScaledClock(100)}
	if mutate != nil {
		mutate(&cfg)
	}
	a := start(t, cfg)
	// The node agent registers its node and reports it Ready on its
	// own time; tests that compare the log before and after an attack
	// start once it has, or its report lands between the two.
	k := projections.Key{Kind: "Node", Name: cfg.Pods.Agent.Node}
	deadline := time.Now().Add(wait)
	for a.Store().Get(k).GetStatus().GetPhase() != "Ready" {
		if time.Now().After(deadline) {
			t.Fatalf("node %s is not Ready: %v", k.Name, a.Store().Get(k).GetStatus())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return a, &api.Client{BaseURL: a.URL()}, cfg.DataDir
}

func pushModule(t *testing.T, a *app.App, ref string, module []byte) {
	t.Helper()
	if _, err := a.Images().Push(context.Background(), ref, bytes.NewReader(module), 0); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

func applyDoc(t *testing.T, c *api.Client, doc string) {
	t.Helper()
	if _, err := c.Apply(context.Background(), "test.yaml", []byte(doc), ""); err != nil {
		t.Fatalf("apply: %v\n%s", err, doc)
	}
}

// waitPod polls until the pod's status satisfies cond.
func waitPod(t *testing.T, a *app.App, name, what string, cond func(*schemas.Status) bool) *schemas.Status {
	t.Helper()
	k := projections.Key{Kind: "Pod", Namespace: "default", Name: name}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st := a.Store().Get(k).GetStatus()
		if st != nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: not %s; status %v", name, what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func phaseIs(phases ...string) func(*schemas.Status) bool {
	// A pod's phase is Kubernetes' (decision 0060): a container that
	// completed leaves its pod Succeeded, one that ended in error Failed.
	kube := map[string]string{"Completed": "Succeeded", "Error": "Failed"}
	return func(st *schemas.Status) bool {
		for _, p := range phases {
			if st.GetPhase() == p || st.GetPhase() == kube[p] {
				return true
			}
		}
		return false
	}
}

// podLogs is what the pod's container wrote.
func podLogs(t *testing.T, a *app.App, name string) string {
	t.Helper()
	var b strings.Builder
	err := a.NodeStore().ReadLogs(context.Background(), events.LogQuery{Node: "local", Namespace: "default", Pod: name, Container: "main"}, func(l events.LogLine) error {
		b.Write(l.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// podLogsContain waits until the pod's logs contain want.
func podLogsContain(t *testing.T, a *app.App, name, want string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		l := podLogs(t, a, name)
		if strings.Contains(l, want) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: logs lack %q:\n%s", name, want, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serving fails the test unless the API still answers.
func serving(t *testing.T, c *api.Client) {
	t.Helper()
	if _, err := c.List(context.Background(), api.Query{Kind: "Namespace"}); err != nil {
		t.Fatalf("the process no longer serves: %v", err)
	}
}

func podDoc(name, image, policy string, args []string, extra string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: local
  restartPolicy: %s
  containers:
  - name: main
    image: %s
    args: [%s]
%s`, name, policy, image, strings.Join(quoted, ", "), extra)
}

// Modules written byte by byte: each is valid WebAssembly that wazero
// compiles.
var (
	// 58 bytes: one memory page, _start, and a data segment of no bytes,
	// so no data at all: the module whose memory came back nil from the
	// node's copy-on-write allocator and panicked the process.
	onePageModule = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // \0asm, version 1
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
		0x03, 0x02, 0x01, 0x00, // function 0 has type 0
		0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1 page
		0x07, 0x13, 0x02, // exports:
		0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // _start: func 0
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00, // memory: memory 0
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: an empty body
		0x0b, 0x06, 0x01, 0x00, 0x41, 0x00, 0x0b, 0x00, // data: 0 bytes at 0
	}
	// A memory whose minimum is 4 GiB (65536 pages).
	hugeMemoryModule = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x05, 0x01, 0x00, 0x80, 0x80, 0x04, // memory: min 65536, no max
		0x07, 0x13, 0x02,
		0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00,
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b,
	}
	// _start runs unreachable: a trap.
	trapModule = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
		0x07, 0x13, 0x02,
		0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00,
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // code: unreachable
	}
)

// No module can panic the node agent or the server: a tiny memory, a
// huge one and a trap each end as that pod's error, and the process
// serves on.
func TestModuleFailuresArePodErrors(t *testing.T) {
	a, c, _ := sandboxApp(t, nil)
	seed(t, c)
	for _, m := range []struct {
		name   string
		module []byte
	}{
		{"one-page", onePageModule},
		{"huge-memory", hugeMemoryModule},
		{"trap", trapModule},
	} {
		pushModule(t, a, m.name+":v1", m.module)
	}
	applyDoc(t, c, podDoc("one-page", "one-page:v1", "Never", nil, ""))
	applyDoc(t, c, podDoc("huge-memory", "huge-memory:v1", "Never", nil, ""))
	applyDoc(t, c, podDoc("trap", "trap:v1", "Never", nil, ""))
	// The one-page module runs and exits 0.
	waitPod(t, a, "one-page", "Completed", phaseIs("Completed"))
	for name, reason := range map[string]string{"huge-memory": "", "trap": "Trap"} {
		st := waitPod(t, a, name, "Error", phaseIs("Error"))
		if reason != "" && st.GetDetails().GetFields()["reason"].GetStringValue() != reason {
			t.Errorf("%s: reason %q, want %s (%s)", name, st.GetDetails().GetFields()["reason"].GetStringValue(), reason, st.GetMessage())
		}
		t.Logf("%s: %s", name, st.GetMessage())
	}
	serving(t, c)
}

// A pod that sets no memory limit gets the node's default (256Mi unless
// configured): a module that allocates past it is OOMKilled instead of
// growing the process.
func TestPodWithoutLimitsGetsTheDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int64 // the node's default; 0 leaves it unset
		allocate int   // MiB the module allocates
		want     string
	}{
		{"default 256Mi", 0, 384, "268435456"},
		{"configured 64Mi", 64 << 20, 128, "67108864"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c, _ := sandboxApp(t, func(cfg *app.Config) { cfg.Pods.Agent.DefaultMemoryLimit = tc.limit })
			pushModule(t, a, "guest:v1", guest(t))
			applyDoc(t, c, podDoc("hog", "guest:v1", "Never", []string{"hog", fmt.Sprint(tc.allocate)}, ""))
			st := waitPod(t, a, "hog", "ended", phaseIs("Error", "Completed"))
			if reason := st.GetDetails().GetFields()["reason"].GetStringValue(); st.GetPhase() != "Failed" || reason != "OOMKilled" || !strings.Contains(st.GetMessage(), tc.want) {
				t.Fatalf("a pod without limits allocating %d MiB: %s %s: %s; want OOMKilled at %s bytes", tc.allocate, st.GetPhase(), reason, st.GetMessage(), tc.want)
			}
			serving(t, c)
		})
	}
}

// A module sees its volumes and nothing else: symlinks, .., hard links
// and renames do not leave a mount, a readOnly mount refuses every
// write, and nothing on the host changes.
func TestModuleCannotLeaveItsVolumes(t *testing.T) {
	hostRoot := t.TempDir()
	shared, ro := filepath.Join(hostRoot, "shared"), filepath.Join(hostRoot, "ro")
	for _, d := range []string{shared, ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "file.txt"), []byte("read me"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, c, dataDir := sandboxApp(t, func(cfg *app.Config) { cfg.Pods.Agent.HostPathRoots = []string{hostRoot} })
	keys := filepath.Join(dataDir, "auth", "encryption.keys")
	keysBefore, err := os.ReadFile(keys)
	if err != nil {
		t.Fatalf("the data directory has no key file to steal: %v", err)
	}
	if err := os.WriteFile(filepath.Join(shared, "inner.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Links the host left in a mounted directory: two lead out, one stays
	// inside (and works).
	for link, target := range map[string]string{"root-link": "/", "keys-link": keys, "inner-link": "inner.txt"} {
		if err := os.Symlink(target, filepath.Join(shared, link)); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "written-by-a-pod")
	pushModule(t, a, "guest:v1", guest(t))
	applyDoc(t, c, podDoc("escape", "guest:v1", "Never", []string{"escape"}, fmt.Sprintf(`    env:
    - {name: KEYS, value: %q}
    - {name: OUTSIDE, value: %q}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: scratch, mountPath: /scratch}
    - {name: host, mountPath: /host}
    - {name: ro, mountPath: /ro, readOnly: true}
  volumes:
  - {name: data, emptyDir: {}}
  - {name: scratch, emptyDir: {}}
  - {name: host, hostPath: {path: %q}}
  - {name: ro, hostPath: {path: %q}}
`, keys, outside, shared, ro)))
	st := waitPod(t, a, "escape", "ended", phaseIs("Completed", "Error"))
	logs := podLogsContain(t, a, "escape", "\n")
	if st.GetPhase() != "Succeeded" || strings.Contains(logs, "ESCAPED") {
		t.Fatalf("the module left its volumes (%s: %s):\n%s", st.GetPhase(), st.GetMessage(), logs)
	}
	if keysAfter, err := os.ReadFile(keys); err != nil || !bytes.Equal(keysAfter, keysBefore) {
		t.Fatalf("the key file changed: %v", err)
	}
	if _, err := os.Lstat(outside); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the module wrote %s on the host: %v", outside, err)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "file.txt")); err != nil || string(b) != "read me" {
		t.Fatalf("the read-only file now holds %q (%v)", b, err)
	}
	entries, _ := os.ReadDir(ro)
	if len(entries) != 1 {
		t.Fatalf("the read-only directory holds %d entries", len(entries))
	}
	serving(t, c)
}

// du is the bytes of regular files under dir.
func du(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Volumes live in the node's directory, outside the data directory, are
// bounded per pod, and go when the pod is deleted; a pod's logs are
// bounded too.
func TestVolumesAreTheNodesAndBounded(t *testing.T) {
	a, c, dataDir := sandboxApp(t, func(cfg *app.Config) { cfg.Pods.Agent.MaxLogBytes = 1 << 20 })
	nodeDir := dataDir + "-node"
	pushModule(t, a, "guest:v1", guest(t))
	applyDoc(t, c, podDoc("touch", "guest:v1", "Never", []string{"touch", "marker-7f3a"}, `    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - {name: data, emptyDir: {}}
`))
	waitPod(t, a, "touch", "Completed", phaseIs("Completed"))
	find := func(dir string) []string {
		var found []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, []byte("marker-7f3a")) {
					found = append(found, p)
				}
			}
			return nil
		})
		return found
	}
	if f := find(dataDir); len(f) > 0 {
		t.Fatalf("a volume lives in the data directory: %q", f)
	}
	f := find(nodeDir)
	if len(f) != 1 {
		t.Fatalf("the volume's file is not in the node directory %s: %q", nodeDir, f)
	}
	if _, err := c.Delete(context.Background(), api.Key{Kind: "Pod", Namespace: "default", Name: "touch"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		if _, err := os.Stat(f[0]); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted pod's volume is still there: %s", f[0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	// An emptyDir's sizeLimit bounds what the pod writes into it.
	applyDoc(t, c, podDoc("fill", "guest:v1", "Never", []string{"fill", "8"}, `    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - {name: data, emptyDir: {sizeLimit: 1Mi}}
`))
	waitPod(t, a, "fill", "Completed", phaseIs("Completed"))
	logs := podLogsContain(t, a, "fill", "filled")
	if !strings.Contains(logs, "fill stopped at") || !strings.Contains(logs, "small files stopped at") {
		t.Fatalf("the volume took everything written:\n%s", logs)
	}
	if n := du(filepath.Join(nodeDir, "volumes")); n > 1<<20 {
		t.Fatalf("the pod's volumes hold %d bytes, over its 1Mi limit", n)
	}

	// The node's log limit (1 MiB here) bounds what a pod's output puts
	// in the logs stream.
	applyDoc(t, c, podDoc("spew", "guest:v1", "Never", []string{"spew", "8"}, ""))
	waitPod(t, a, "spew", "Completed", phaseIs("Completed"))
	logs = podLogsContain(t, a, "spew", "log limit")
	if len(logs) > 1<<20+4096 {
		t.Fatalf("the pod logged %d bytes past a 1 MiB limit", len(logs))
	}
	serving(t, c)
}

// image push compiles the module and refuses one that does not compile,
// naming why, and refuses refs that are not NAME:TAG.
func TestImagePushRefusesWhatCannotRun(t *testing.T) {
	a, c, _ := sandboxApp(t, nil)
	seed(t, c)
	before := fingerprintOf(t, a)
	ctx := context.Background()
	// Starts like WebAssembly; its memory section claims more bytes than
	// the module has.
	corrupt := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01}
	_, err := c.PushImage(ctx, "corrupt:v1", bytes.NewReader(corrupt), int64(len(corrupt)))
	if err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("push of a corrupt module: %v; want a refusal saying it does not compile", err)
	}
	// 23 bytes whose element section declares three billion segments:
	// the runtime's decoder would allocate for all of them at once and
	// the process would die of it (wasmcheck refuses it first).
	bomb := []byte("\x00asm\x01\x00\x00\x00\t\x04\xb2\xb2\xb2\xb2\x05\a0000000")
	_, err = c.PushImage(ctx, "bomb:v1", bytes.NewReader(bomb), int64(len(bomb)))
	if err == nil || !strings.Contains(err.Error(), "malformed WebAssembly module: section element") {
		t.Fatalf("push of a module declaring billions of segments: %v; want a refusal naming the section", err)
	}
	for _, ref := range []string{"../../etc:v1", "app\x00:v1", "a/b/c:v1", "/abs:v1", "app:v1/..", "app:..", "app:-v1", "app:v\x001", "./app:v1", "a//b:v1", "APP:v1"} {
		if _, err := c.PushImage(ctx, ref, bytes.NewReader(onePageModule), int64(len(onePageModule))); err == nil {
			t.Errorf("push %q was accepted", ref)
		} else if !strings.Contains(err.Error(), "image") {
			t.Errorf("push %q: %v; want an error naming the image ref", ref, err)
		}
	}
	for _, ref := range []string{"app:v1", "team/app:v1.2-rc_3"} {
		if _, err := c.PushImage(ctx, ref, bytes.NewReader(onePageModule), int64(len(onePageModule))); err != nil {
			t.Errorf("push %q: %v", ref, err)
		}
	}
	list, err := a.Images().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("the image store holds %v, want the two good pushes", list)
	}
	unchanged(t, a, before)
	serving(t, c)
}

// A Secret's value that a pod takes as env is in clear nowhere on disk:
// not in the data directory (the log, the node-work bucket) and not in
// the node's directory; the pod still gets it.
func TestPodSecretEnvIsSealedForItsNode(t *testing.T) {
	a, c, dataDir := sandboxApp(t, nil)
	const value = "v4lue-0f-a-secret-9c1e"
	pushModule(t, a, "guest:v1", guest(t))
	applyDoc(t, c, `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: default}
stringData: {password: `+value+`}
`)
	applyDoc(t, c, podDoc("env", "guest:v1", "Never", []string{"env-digest", "PASSWORD"}, `    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
`))
	waitPod(t, a, "env", "Completed", phaseIs("Completed"))
	sum := sha256.Sum256([]byte(value))
	podLogsContain(t, a, "env", "digest "+hex.EncodeToString(sum[:]))
	// The node-work bucket's value is flushed to its file store by now
	// (the embedded server writes through to the OS); look at every file.
	for _, dir := range []string{dataDir, dataDir + "-node"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte(value)) {
				t.Errorf("the Secret's value is in clear in %s", p)
			}
			return nil
		})
	}
	serving(t, c)
}
