package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	enchex "encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/schemas/podspec"
)

// ImagesBucket is the object store bucket of WebAssembly images: each
// module stored once under its digest, each NAME:TAG a link to one.
const ImagesBucket = "JP_IMAGES"

// DefaultMaxImageBytes bounds one image unless configured otherwise.
const DefaultMaxImageBytes = 64 << 20

var (
	// ErrImageInUse means an image cannot be removed: a pod uses it.
	ErrImageInUse = errors.New("image in use")
	// ErrBadImage means pushed bytes are not an image jetplane can store.
	ErrBadImage = errors.New("bad image")
)

// wasmMagic starts every WebAssembly binary module.
var wasmMagic = []byte{0x00, 'a', 's', 'm'}

// Image is one tag of the image store.
type Image struct {
	// Ref is NAME:TAG.
	Ref    string
	Digest string // sha256:<hex>
	Size   uint64
	Time   time.Time
}

// Images is the image store: content-addressed blobs and tags linking to
// them. Safe for concurrent use.
type Images struct {
	os    jetstream.ObjectStore
	check atomic.Pointer[ModuleCheck]
	// sync makes the bucket's writes durable (Log.syncStream).
	sync func() error
}

// synced makes the bucket's writes durable, when the log says how.
func (im *Images) synced() error {
	if im.sync == nil {
		return nil
	}
	return im.sync()
}

func blobName(digest string) string { return "blobs/" + digest }
func tagName(ref string) string     { return "tags/" + ref }

// Images opens (creating if needed) the image store, with the log's
// replication.
func (l *Log) Images(ctx context.Context) (*Images, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", ImagesBucket, err)
	}
	os, err := l.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: ImagesBucket, Description: "jetplane WebAssembly images",
		Replicas: info.Config.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", ImagesBucket, err)
	}
	return &Images{os: os, sync: func() error { return l.syncStream("OBJ_"+ImagesBucket, false) }}, nil
}

// ParseImageRef splits NAME:TAG or NAME@sha256:<hex>. Exactly one of tag
// and digest is set. The grammar is podspec's, so that what a pod names
// and what the store holds agree.
func ParseImageRef(ref string) (name, tag, digest string, err error) {
	return podspec.ParseImageRef(ref)
}

// ModuleCheck tells why a module cannot be run (it does not compile),
// nil when it can.
type ModuleCheck func(ctx context.Context, module []byte) error

// SetModuleCheck makes Push refuse, as ErrBadImage, a module check
// refuses. Set once, before pushes.
func (im *Images) SetModuleCheck(check ModuleCheck) { im.check.Store(&check) }

// Push stores the module read from r (at most max bytes) under its digest,
// once however often it is pushed, and points the tag ref at it. It
// refuses an empty module, one over max, and bytes that are not a
// WebAssembly binary (ErrBadImage), before storing anything.
func (im *Images) Push(ctx context.Context, ref string, r io.Reader, max int64) (Image, error) {
	if _, tag, _, err := ParseImageRef(ref); err != nil || tag == "" {
		if err == nil {
			err = fmt.Errorf("image %q: push needs NAME:TAG", ref)
		}
		return Image{}, err
	}
	if max <= 0 {
		max = DefaultMaxImageBytes
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return Image{}, fmt.Errorf("push %s: read: %w", ref, err)
	}
	switch {
	case len(data) == 0:
		return Image{}, fmt.Errorf("push %s: %w: the module is empty (0 bytes)", ref, ErrBadImage)
	case int64(len(data)) > max:
		return Image{}, fmt.Errorf("push %s: %w: the module is over the %d-byte limit", ref, ErrBadImage, max)
	case !bytes.HasPrefix(data, wasmMagic):
		return Image{}, fmt.Errorf("push %s: %w: not a WebAssembly module (no \\0asm header); build one with GOOS=wasip1 GOARCH=wasm", ref, ErrBadImage)
	}
	if check := im.check.Load(); check != nil {
		if err := (*check)(ctx, data); err != nil {
			return Image{}, fmt.Errorf("push %s: %w: the module does not compile: %v", ref, ErrBadImage, err)
		}
	}
	sum := sha256.Sum256(data)
	digest := "sha256:" + enchex.EncodeToString(sum[:])
	blob, err := im.os.GetInfo(ctx, blobName(digest))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		blob, err = im.os.Put(ctx, jetstream.ObjectMeta{Name: blobName(digest), Metadata: map[string]string{"digest": digest}}, bytes.NewReader(data))
	}
	if err != nil {
		return Image{}, fmt.Errorf("push %s: %w", ref, err)
	}
	if old, err := im.os.GetInfo(ctx, tagName(ref)); err == nil && old.Opts != nil && old.Opts.Link != nil {
		if old.Opts.Link.Name == blob.Name {
			if err := im.synced(); err != nil {
				return Image{}, fmt.Errorf("push %s: %w", ref, err)
			}
			return Image{Ref: ref, Digest: digest, Size: blob.Size, Time: old.ModTime}, nil
		}
		if err := im.os.Delete(ctx, tagName(ref)); err != nil {
			return Image{}, fmt.Errorf("push %s: move tag: %w", ref, err)
		}
	}
	link, err := im.os.AddLink(ctx, tagName(ref), blob)
	if err != nil {
		return Image{}, fmt.Errorf("push %s: tag: %w", ref, err)
	}
	if err := im.synced(); err != nil {
		return Image{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return Image{Ref: ref, Digest: digest, Size: blob.Size, Time: link.ModTime}, nil
}

// Resolve returns the digest and size ref names; ErrNotFound when there is
// no such image.
func (im *Images) Resolve(ctx context.Context, ref string) (digest string, size uint64, err error) {
	_, tag, d, err := ParseImageRef(ref)
	if err != nil {
		return "", 0, err
	}
	name := blobName(d)
	if tag != "" {
		link, err := im.os.GetInfo(ctx, tagName(ref))
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return "", 0, fmt.Errorf("image %s: %w; push it with jetplane image push", ref, ErrNotFound)
		}
		if err != nil {
			return "", 0, fmt.Errorf("image %s: %w", ref, err)
		}
		if link.Opts == nil || link.Opts.Link == nil {
			return "", 0, fmt.Errorf("image %s: the tag is not a link", ref)
		}
		name = link.Opts.Link.Name
	}
	info, err := im.os.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", 0, fmt.Errorf("image %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("image %s: %w", ref, err)
	}
	return strings.TrimPrefix(name, "blobs/"), info.Size, nil
}

// Fetch writes the module stored under digest to w (at most max bytes).
// It does not verify the digest: the node does, on what it received.
func (im *Images) Fetch(ctx context.Context, digest string, w io.Writer, max int64) error {
	res, err := im.os.Get(ctx, blobName(digest))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("image %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("image %s: %w", digest, err)
	}
	defer res.Close()
	n, err := io.Copy(w, io.LimitReader(res, max+1))
	if err != nil {
		return fmt.Errorf("image %s: %w", digest, err)
	}
	if n > max {
		return fmt.Errorf("image %s: %w: over the %d-byte limit", digest, ErrBadImage, max)
	}
	return nil
}

// List returns every tag, sorted by ref.
func (im *Images) List(ctx context.Context) ([]Image, error) {
	infos, err := im.os.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	sizes := map[string]uint64{}
	for _, in := range infos {
		if d, ok := strings.CutPrefix(in.Name, "blobs/"); ok {
			sizes[d] = in.Size
		}
	}
	var out []Image
	for _, in := range infos {
		ref, ok := strings.CutPrefix(in.Name, "tags/")
		if !ok || in.Opts == nil || in.Opts.Link == nil {
			continue
		}
		d := strings.TrimPrefix(in.Opts.Link.Name, "blobs/")
		out = append(out, Image{Ref: ref, Digest: d, Size: sizes[d], Time: in.ModTime})
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Ref, b.Ref) })
	return out, nil
}

// Remove deletes tag ref, and the module it names when no other tag links
// to it. inUse names the pods that use a ref or digest; Remove refuses
// (ErrImageInUse, naming them) when there are any.
func (im *Images) Remove(ctx context.Context, ref string, inUse func(ref, digest string) []string) error {
	digest, _, err := im.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	if inUse != nil {
		if pods := inUse(ref, digest); len(pods) > 0 {
			named := pods
			if len(named) > 10 {
				named = append(slices.Clone(named[:10]), fmt.Sprintf("and %d more", len(pods)-10))
			}
			return fmt.Errorf("remove %s: %w by pod %s: delete them first", ref, ErrImageInUse, strings.Join(named, ", "))
		}
	}
	if _, tag, _, _ := ParseImageRef(ref); tag != "" {
		if err := im.os.Delete(ctx, tagName(ref)); err != nil {
			return fmt.Errorf("remove %s: %w", ref, err)
		}
	}
	all, err := im.List(ctx)
	if err != nil {
		return err
	}
	for _, other := range all {
		if other.Digest == digest {
			return im.synced()
		}
	}
	if err := im.os.Delete(ctx, blobName(digest)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("remove %s: %w", ref, err)
	}
	return im.synced()
}
