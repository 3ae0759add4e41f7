package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/scheduler"
)

// TestPluginFromImageStore: a plugin config naming an image in jetplane's
// image store (pushed to embedded NATS) loads the module from there and
// filters as the same module loaded from its file.
func TestPluginFromImageStore(t *testing.T) {
	ctx := context.Background()
	l := testenv.Log(t, events.Config{})
	images, err := l.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(guestPath(t, "labelfilter"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.Push(ctx, "plugins/labelfilter:v1", f, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduler.ParseConfig([]byte(`profiles:
- schedulerName: ssd
  plugins:
    multiPoint:
      enabled: [{name: labelfilter}]
  pluginConfig:
  - name: labelfilter
    args: {image: "plugins/labelfilter:v1", timeout: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Build(Registry()); err == nil || !strings.Contains(err.Error(), "no image store") {
		t.Fatalf("without an image store: %v", err)
	}
	profiles, err := cfg.Build(RegistryWithImages(images))
	if err != nil {
		t.Fatal(err)
	}
	prof := profiles["ssd"]
	var pl scheduler.Plugin
	for _, p := range prof.Filter {
		if p.Name() == "labelfilter" {
			pl = p
		}
	}
	if pl == nil {
		t.Fatal("the profile has no labelfilter")
	}
	defer pl.(Closer).Close()
	fromFile := loadGuest(t, "labelfilter")
	if got, want := pl.(scheduler.Versioned).Version(), fromFile.(scheduler.Versioned).Version(); got != want || !strings.HasPrefix(img.Digest, "sha256:"+strings.TrimPrefix(got, "wasm/sha256:")) {
		t.Fatalf("version %s, from the file %s, image %s", got, want, img.Digest)
	}
	var nodes []*scheduler.NodeInfo
	for i := 0; i < 6; i++ {
		nodes = append(nodes, scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i),
			Labels: map[string]string{"disk": []string{"ssd", "hdd"}[i%2]}}}, uint64(i+1)))
	}
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}}})
	only := &scheduler.Profile{Name: "image"}
	only.AddPlugin(pl, 1)
	d := scheduler.Cycle(ctx, only, scheduler.NewCycleState(scheduler.NewSnapshot(1, nodes), 1), pod, 0)
	if d.Feasible != 3 || d.Rejections["node(s) didn't match the pod's labels"] != 3 {
		t.Fatalf("feasible %d, rejections %v", d.Feasible, d.Rejections)
	}

	// An image that is not there is an error naming it.
	_, err = LoadFrom(ctx, "missing", Args{Image: "plugins/missing:v1"}, images)
	if !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("missing image: %v", err)
	}
	// Bytes that do not match the digest they were resolved to are refused.
	_, err = LoadFrom(ctx, "tampered", Args{Image: "plugins/labelfilter:v1"}, tampered{images})
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("tampered image: %v", err)
	}
}

// tampered serves other bytes than the digest it resolves.
type tampered struct{ *events.Images }

func (t tampered) Fetch(ctx context.Context, digest string, w io.Writer, max int64) error {
	_, err := w.Write([]byte("\x00asm\x01\x00\x00\x00"))
	return err
}
