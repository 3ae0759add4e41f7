package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/schemas"
)

// podTemplateOf is the pod spec describe shows containers of: a Pod's own
// spec, a workload's spec.template.spec, a CronJob's
// spec.jobTemplate.spec.template.spec; nil for other kinds.
func podTemplateOf(o *schemas.Object) (spec *structpb.Struct, isPod bool) {
	f := o.GetSpec().GetFields()
	if o.GetKind() == "Pod" {
		return o.GetSpec(), true
	}
	if jt := f["jobTemplate"].GetStructValue(); jt != nil {
		f = jt.GetFields()["spec"].GetStructValue().GetFields()
	}
	return f["template"].GetStructValue().GetFields()["spec"].GetStructValue(), false
}

// describeContainers writes kubectl's Containers section: for a pod each
// container's image, args, state, last state, readiness, restart count,
// limits and environment (values from Secrets and ConfigMaps shown as the
// reference, never the value); for a workload, its pod template's.
func describeContainers(b *strings.Builder, o *schemas.Object, now time.Time) {
	raw, isPod := podTemplateOf(o)
	if raw == nil {
		return
	}
	var spec corev1.PodSpec
	if js, err := json.Marshal(raw.AsMap()); err != nil || json.Unmarshal(js, &spec) != nil || len(spec.Containers) == 0 {
		return
	}
	statuses := map[string]corev1.ContainerStatus{}
	if isPod {
		var ps corev1.PodStatus
		if js, err := json.Marshal(o.GetStatus().GetDetails().AsMap()); err == nil && json.Unmarshal(js, &ps) == nil {
			for _, cs := range ps.ContainerStatuses {
				statuses[cs.Name] = cs
			}
		}
	}
	pad := "  "
	if !isPod {
		b.WriteString("Pod Template:\n")
		pad = "    "
		if len(spec.NodeSelector) > 0 {
			kv(b, pad[:2], "Node-Selectors", labelList(spec.NodeSelector))
		}
		b.WriteString(pad[:2] + "Containers:\n")
	} else {
		b.WriteString("Containers:\n")
	}
	in := pad + "  "
	for _, c := range spec.Containers {
		b.WriteString(pad + c.Name + ":\n")
		cs, seen := statuses[c.Name]
		kv(b, in, "Image", c.Image)
		if isPod {
			kv(b, in, "Image ID", dash(cs.ImageID))
		}
		if len(c.Command) > 0 {
			b.WriteString(in + "Command:\n")
			for _, a := range c.Command {
				b.WriteString(in + "  " + a + "\n")
			}
		}
		if len(c.Args) > 0 {
			b.WriteString(in + "Args:\n")
			for _, a := range c.Args {
				b.WriteString(in + "  " + a + "\n")
			}
		}
		if isPod {
			if seen {
				containerState(b, in, "State", cs.State, now)
				containerState(b, in, "Last State", cs.LastTerminationState, now)
				kv(b, in, "Ready", fmt.Sprint(cs.Ready))
				kv(b, in, "Restart Count", fmt.Sprint(cs.RestartCount))
			} else {
				kv(b, in, "State", "Waiting")
				kv(b, in+"  ", "Reason", "not reported by a node yet")
				kv(b, in, "Ready", "false")
				kv(b, in, "Restart Count", "0")
			}
		}
		if len(c.Resources.Limits) > 0 {
			b.WriteString(in + "Limits:\n")
			for _, n := range sortedKeys(c.Resources.Limits) {
				q := c.Resources.Limits[n]
				kv(b, in+"  ", string(n), q.String())
			}
		}
		if len(c.Resources.Requests) > 0 {
			b.WriteString(in + "Requests:\n")
			for _, n := range sortedKeys(c.Resources.Requests) {
				q := c.Resources.Requests[n]
				kv(b, in+"  ", string(n), q.String())
			}
		}
		if len(c.Env) == 0 && len(c.EnvFrom) == 0 {
			kv(b, in, "Environment", "<none>")
		} else {
			b.WriteString(in + "Environment:\n")
			for _, e := range c.Env {
				kv(b, in+"  ", e.Name, envValue(e))
			}
			for _, f := range c.EnvFrom {
				switch {
				case f.SecretRef != nil:
					b.WriteString(fmt.Sprintf("%s  %s<all keys of Secret %s>%s\n", in, prefixNote(f.Prefix), f.SecretRef.Name, optional(f.SecretRef.Optional)))
				case f.ConfigMapRef != nil:
					b.WriteString(fmt.Sprintf("%s  %s<all keys of ConfigMap %s>%s\n", in, prefixNote(f.Prefix), f.ConfigMapRef.Name, optional(f.ConfigMapRef.Optional)))
				}
			}
		}
		if len(c.VolumeMounts) > 0 {
			b.WriteString(in + "Mounts:\n")
			for _, m := range c.VolumeMounts {
				ro := "rw"
				if m.ReadOnly {
					ro = "ro"
				}
				b.WriteString(fmt.Sprintf("%s  %s from %s (%s)\n", in, m.MountPath, m.Name, ro))
			}
		}
	}
}

// envValue shows an environment variable as kubectl does: a literal
// value, or where the value comes from (a Secret's value is never shown).
func envValue(e corev1.EnvVar) string {
	vf := e.ValueFrom
	switch {
	case vf == nil:
		return e.Value
	case vf.SecretKeyRef != nil:
		return fmt.Sprintf("<set to the key '%s' in secret '%s'>%s", vf.SecretKeyRef.Key, vf.SecretKeyRef.Name, optional(vf.SecretKeyRef.Optional))
	case vf.ConfigMapKeyRef != nil:
		return fmt.Sprintf("<set to the key '%s' of config map '%s'>%s", vf.ConfigMapKeyRef.Key, vf.ConfigMapKeyRef.Name, optional(vf.ConfigMapKeyRef.Optional))
	case vf.FieldRef != nil:
		return fmt.Sprintf("(%s:%s)", vf.FieldRef.APIVersion, vf.FieldRef.FieldPath)
	case vf.ResourceFieldRef != nil:
		return fmt.Sprintf("(%s)", vf.ResourceFieldRef.Resource)
	}
	return ""
}

func optional(p *bool) string {
	return fmt.Sprintf("  Optional: %v", p != nil && *p)
}

func prefixNote(p string) string {
	if p == "" {
		return ""
	}
	return "prefix " + p + " "
}

// containerState writes one container state (State or Last State).
func containerState(b *strings.Builder, in, name string, s corev1.ContainerState, now time.Time) {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC1123Z)
	}
	sub := in + "  "
	switch {
	case s.Running != nil:
		kv(b, in, name, "Running")
		kv(b, sub, "Started", at(s.Running.StartedAt.Time))
	case s.Terminated != nil:
		t := s.Terminated
		kv(b, in, name, "Terminated")
		kv(b, sub, "Reason", dash(t.Reason))
		if t.Message != "" {
			kv(b, sub, "Message", t.Message)
		}
		kv(b, sub, "Exit Code", fmt.Sprint(t.ExitCode))
		if !t.StartedAt.IsZero() {
			kv(b, sub, "Started", at(t.StartedAt.Time))
		}
		if !t.FinishedAt.IsZero() {
			kv(b, sub, "Finished", at(t.FinishedAt.Time))
		}
	case s.Waiting != nil:
		kv(b, in, name, "Waiting")
		kv(b, sub, "Reason", dash(s.Waiting.Reason))
		if s.Waiting.Message != "" {
			kv(b, sub, "Message", s.Waiting.Message)
		}
	default:
		kv(b, in, name, "<none>")
	}
}

// kv writes "name: value" aligned as kubectl's describe aligns it.
func kv(b *strings.Builder, in, name, value string) {
	fmt.Fprintf(b, "%s%-*s %s\n", in, max(16, len(name)+1), name+":", value)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func labelList(m map[string]string) string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func sortedKeys(m corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
