package helmrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
)

// AnnotationTemplate on a child names the template (and line) it was
// rendered from.
const AnnotationTemplate = "jetplane.dev/template"

// Group is the metadata.group of every child of release.
func Group(release projections.Key) string {
	return "helmrelease." + release.Namespace + "." + release.Name
}

// ApplyName is the name of the Apply child that carries the rendered
// object k of release. It is a DNS-1123 subdomain and, like every Apply
// name, a valid label value (at most 63 characters): long names are cut
// and made unique with a digest.
func ApplyName(release projections.Key, k projections.Key) string {
	parts := []string{release.Name, strings.ToLower(k.Kind)}
	if k.Namespace != "" {
		parts = append(parts, k.Namespace)
	}
	name := strings.Join(append(parts, k.Name), ".")
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	head := strings.TrimRight(name[:54], ".-")
	return head + "-" + hex.EncodeToString(sum[:4])
}

// Children turns a rendered release into the objects jetplane stores for
// it, in the render's order. With a cluster, each rendered object becomes
// an Apply of that object into the cluster, named by ApplyName in the
// release's namespace; without one, each is a jetplane object itself.
// Every child carries the release's group and owner labels, and dependsOn
// between children follows the render's; keepDep, when not nil, keeps only
// dependencies of the kinds it accepts. It is pure.
func Children(release projections.Key, cluster string, res *render.Result, keepDep func(kind string) bool) ([]*schemas.Object, error) {
	group := Group(release)
	childKey := map[projections.Key]projections.Key{}
	for _, o := range res.Objects {
		k := o.Key()
		if cluster == "" {
			childKey[k] = k
		} else {
			childKey[k] = projections.Key{Kind: apply.Kind, Namespace: release.Namespace, Name: ApplyName(release, k)}
		}
	}
	out := make([]*schemas.Object, 0, len(res.Objects))
	for _, o := range res.Objects {
		var deps []*schemas.ObjectKey
		for _, d := range o.Object.GetMetadata().GetDependsOn() {
			if keepDep != nil && !keepDep(d.GetKind()) {
				continue
			}
			deps = append(deps, childKey[projections.KeyOf(d)].Proto())
		}
		owner := map[string]string{LabelReleaseNamespace: release.Namespace, LabelReleaseName: release.Name}
		from := fmt.Sprintf("%s:%d", o.Template, o.Line)
		if cluster == "" {
			c := proto.CloneOf(o.Object)
			md := c.Metadata
			md.Group = group
			md.DependsOn = deps
			if md.Labels == nil {
				md.Labels = map[string]string{}
			}
			for k, v := range owner {
				md.Labels[k] = v
			}
			if md.Annotations == nil {
				md.Annotations = map[string]string{}
			}
			md.Annotations[AnnotationTemplate] = from
			out = append(out, c)
			continue
		}
		m := cleanManifest(o.Manifest)
		ms, err := structpb.NewStruct(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
		k := childKey[o.Key()]
		out = append(out, &schemas.Object{
			ApiVersion: "v1",
			Kind:       apply.Kind,
			Metadata: &schemas.ObjectMeta{
				Name:        k.Name,
				Namespace:   k.Namespace,
				Group:       group,
				Labels:      owner,
				Annotations: map[string]string{AnnotationTemplate: from},
				DependsOn:   deps,
			},
			Spec: &structpb.Struct{Fields: map[string]*structpb.Value{
				"cluster":  structpb.NewStringValue(cluster),
				"manifest": structpb.NewStructValue(ms),
			}},
		})
	}
	return out, nil
}

// cleanManifest drops jetplane's own metadata fields from a rendered
// Kubernetes manifest: the apiserver knows neither.
func cleanManifest(m map[string]any) map[string]any {
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return m
	}
	if _, has := md["dependsOn"]; !has {
		if _, has := md["group"]; !has {
			return m
		}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	nm := make(map[string]any, len(md))
	for k, v := range md {
		if k != "dependsOn" && k != "group" {
			nm[k] = v
		}
	}
	out["metadata"] = nm
	return out
}
