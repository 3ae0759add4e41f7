// Package podspec reads the specs of jetplane's Pod and Node kinds with
// the types of k8s.io/api/core/v1, so a manifest written for Kubernetes
// loads unchanged, and refuses by name every field jetplane would
// otherwise silently ignore. It also defines the work item instances hand
// to node agents. It imports no runtime (no wazero, no NATS): the manifest
// validator, the reconcilers and the agent all use it.
package podspec

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"
)

// Kinds, as keys name them.
const (
	KindPod  = "Pod"
	KindNode = "Node"
)

// FieldError is a spec field jetplane cannot accept.
type FieldError struct {
	Field  string // path from spec, e.g. spec.containers[0].securityContext.privileged
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// unknownFieldRE pulls the field's path out of sigs.k8s.io/json's message.
var unknownFieldRE = regexp.MustCompile(`^unknown field "([^"]+)"`)

// strict decodes spec into out, refusing fields the type does not have at
// their full path (spec.containers[0].comand), as kube-apiserver does.
func strict(spec *structpb.Struct, out any) error {
	raw, err := spec.MarshalJSON()
	if err != nil {
		return fieldErr("spec", "%v", err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, out)
	for _, se := range strictErrs {
		if m := unknownFieldRE.FindStringSubmatch(se.Error()); m != nil {
			return fieldErr("spec."+m[1], "unknown field; see the Kubernetes v1 schema")
		}
		return fieldErr("spec", "%v", se)
	}
	if err != nil {
		return fieldErr("spec", "%v", err)
	}
	return nil
}

// Pod decodes and checks a Pod's spec: directly when it has the common
// shape podFast reads, through JSON (strict) otherwise, with the same
// result either way.
func Pod(spec *structpb.Struct) (*corev1.PodSpec, error) {
	ps := new(corev1.PodSpec)
	if !podFast(spec, ps) {
		*ps = corev1.PodSpec{}
		if err := strict(spec, ps); err != nil {
			return nil, err
		}
	}
	if err := checkPod(ps); err != nil {
		return nil, err
	}
	return ps, nil
}

func checkPod(ps *corev1.PodSpec) error {
	unsupported := func(field string) error {
		return fieldErr("spec."+field, "is not supported: jetplane runs WebAssembly modules, which have no host namespaces, privileges or devices")
	}
	switch {
	case ps.HostNetwork:
		return unsupported("hostNetwork")
	case ps.HostPID:
		return unsupported("hostPID")
	case ps.HostIPC:
		return unsupported("hostIPC")
	case len(ps.InitContainers) > 0:
		return fieldErr("spec.initContainers", "is not supported yet; run the steps in one module")
	case len(ps.EphemeralContainers) > 0:
		return fieldErr("spec.ephemeralContainers", "is not supported")
	case len(ps.Containers) == 0:
		return fieldErr("spec.containers", "is required: at least one container")
	}
	switch ps.RestartPolicy {
	case "", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		return fieldErr("spec.restartPolicy", "%q is not one of Always, OnFailure, Never", ps.RestartPolicy)
	}
	if d := ps.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		return fieldErr("spec.activeDeadlineSeconds", "must be positive")
	}
	vols := map[string]bool{}
	for i, v := range ps.Volumes {
		p := fmt.Sprintf("spec.volumes[%d]", i)
		switch {
		case !labelRE.MatchString(v.Name):
			return fieldErr(p+".name", "%q is not a valid name (DNS-1123 label)", v.Name)
		case vols[v.Name]:
			return fieldErr(p+".name", "%q is used twice", v.Name)
		case v.EmptyDir != nil:
		case v.HostPath != nil:
			if !filepath.IsAbs(v.HostPath.Path) {
				return fieldErr(p+".hostPath.path", "%q must be an absolute path", v.HostPath.Path)
			}
		default:
			return fieldErr(p, "only emptyDir and hostPath volumes are supported")
		}
		vols[v.Name] = true
	}
	names := map[string]bool{}
	for i, c := range ps.Containers {
		p := fmt.Sprintf("spec.containers[%d]", i)
		switch {
		case !labelRE.MatchString(c.Name):
			return fieldErr(p+".name", "%q is not a valid name (DNS-1123 label)", c.Name)
		case names[c.Name]:
			return fieldErr(p+".name", "%q is used twice", c.Name)
		case c.Image == "":
			return fieldErr(p+".image", "is required: NAME:TAG or NAME@sha256:DIGEST of a pushed module")
		case !validImage(c.Image):
			return fieldErr(p+".image", "%q is not NAME:TAG or NAME@sha256:DIGEST", c.Image)
		case c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged:
			return fieldErr(p+".securityContext.privileged", "is not supported: a WebAssembly module has no privileges to grant")
		case c.SecurityContext != nil && c.SecurityContext.Capabilities != nil && len(c.SecurityContext.Capabilities.Add) > 0:
			return fieldErr(p+".securityContext.capabilities.add", "is not supported")
		case c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil:
			return fieldErr(p, "probes are not supported yet")
		case len(c.EnvFrom) > 0:
			return fieldErr(p+".envFrom", "is not supported yet; use env with valueFrom")
		}
		for j, port := range c.Ports {
			if port.HostPort != 0 {
				return fieldErr(fmt.Sprintf("%s.ports[%d].hostPort", p, j), "is not supported: modules have no network unless granted")
			}
		}
		for j, e := range c.Env {
			ep := fmt.Sprintf("%s.env[%d]", p, j)
			if vf := e.ValueFrom; vf != nil && vf.ConfigMapKeyRef == nil && vf.SecretKeyRef == nil {
				return fieldErr(ep+".valueFrom", "only configMapKeyRef and secretKeyRef are supported")
			}
		}
		mounts := map[string]bool{}
		for j, m := range c.VolumeMounts {
			mp := fmt.Sprintf("%s.volumeMounts[%d]", p, j)
			switch {
			case !vols[m.Name]:
				return fieldErr(mp+".name", "%q names no volume of the pod", m.Name)
			case !path.IsAbs(m.MountPath) || path.Clean(m.MountPath) != m.MountPath || strings.ContainsAny(m.MountPath, "\x00\\"):
				return fieldErr(mp+".mountPath", "%q must be an absolute, clean path such as /data", m.MountPath)
			case mounts[m.MountPath]:
				return fieldErr(mp+".mountPath", "%q is mounted twice", m.MountPath)
			case m.SubPath != "" || m.SubPathExpr != "":
				return fieldErr(mp+".subPath", "is not supported")
			}
			mounts[m.MountPath] = true
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Value() < 64<<10 {
			return fieldErr(p+".resources.limits.memory", "%s is below one WebAssembly page (64Ki)", q.String())
		}
		names[c.Name] = true
	}
	return nil
}

func validImage(ref string) bool {
	_, _, _, err := ParseImageRef(ref)
	return err == nil
}

// Node decodes and checks a Node's spec.
func Node(spec *structpb.Struct) (*corev1.NodeSpec, error) {
	ns := new(corev1.NodeSpec)
	if err := strict(spec, ns); err != nil {
		return nil, err
	}
	for i, t := range ns.Taints {
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fieldErr(fmt.Sprintf("spec.taints[%d].effect", i), "%q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
		}
	}
	return ns, nil
}

// Check checks the spec of kind (Pod or Node; other kinds pass).
func Check(kind string, spec *structpb.Struct) error {
	switch kind {
	case KindPod:
		_, err := Pod(spec)
		return err
	case KindNode:
		_, err := Node(spec)
		return err
	}
	return nil
}

// MemoryLimit is a container's memory limit in bytes, 0 when none.
func MemoryLimit(c *corev1.Container) int64 {
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		return q.Value()
	}
	return 0
}

// ParseQuantity is resource.ParseQuantity, for flags.
func ParseQuantity(s string) (resource.Quantity, error) { return resource.ParseQuantity(s) }
