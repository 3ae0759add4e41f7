// Command image writes a container image holding one static binary as an
// OCI image layout: an empty base (no shell, no libc, no package manager),
// the binary at /jetplane, a non-root user, and no timestamps, so the same
// binary gives the same digest. It prints the image's digest. Run it
// through scripts/image, which builds the binary first.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: not root, and not a user any base image
// defines (there is none: the image has no /etc/passwd).
const user = "65532:65532"

// epoch is every file's time: builds of the same binary are identical.
var epoch = time.Unix(0, 0)

func main() {
	binary := flag.String("binary", "", "the static linux binary to put at /jetplane")
	out := flag.String("out", "", "directory of the OCI image layout to write (replaced)")
	arch := flag.String("arch", "amd64", "the binary's architecture")
	tag := flag.String("tag", "", "reference name recorded in the layout's index (org.opencontainers.image.ref.name)")
	flag.Parse()
	if err := run(*binary, *out, *arch, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, out, arch, tag string) error {
	if binary == "" || out == "" {
		return errors.New("--binary and --out are required")
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layer, err := fileLayer(data)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config = v1.Config{
		Entrypoint:   []string{"/jetplane"},
		Cmd:          []string{"serve"},
		User:         user,
		WorkingDir:   "/",
		Env:          []string{"HOME=/tmp"},
		ExposedPorts: map[string]struct{}{"7070/tcp": {}, "4222/tcp": {}, "6222/tcp": {}},
		Labels:       map[string]string{"org.opencontainers.image.title": "jetplane"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return err
	}
	fmt.Println(digest)
	return nil
}

// fileLayer is a layer holding the binary at /jetplane (mode 0555, owned
// by root, so the non-root user can run but not change it) and an empty
// /tmp for a writable mount.
func fileLayer(bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "jetplane", Mode: 0o555, Size: int64(len(bin)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
