package kubeapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// kubeObject is o in Kubernetes' shape: the metadata Kubernetes names
// (creationTimestamp, resourceVersion as a string), the content fields of
// kinds that have them at the top level (a ConfigMap's data), and the
// status a reconciler recorded. apiVersion is o's own unless version names
// another served version of its group (a defined kind's other versions
// share one schema here, as with the None conversion strategy).
func kubeObject(o *schemas.Object, version string) map[string]any {
	m := map[string]any{"apiVersion": o.GetApiVersion(), "kind": o.GetKind()}
	if version != "" {
		m["apiVersion"] = withVersion(o.GetApiVersion(), version)
	}
	md := kubeMeta(o.GetMetadata())
	showManagedFields(md)
	content := manifest.ContentFields(projections.ObjectKey(o).Kind)
	if len(content) > 0 {
		// Kinds without a spec (a ConfigMap) have no generation in
		// Kubernetes: nothing observes one.
		delete(md, "generation")
	}
	m["metadata"] = md
	spec := o.GetSpec().AsMap()
	for _, f := range content {
		if v, ok := spec[f]; ok {
			m[f] = v
			delete(spec, f)
		}
	}
	if len(spec) > 0 || len(content) == 0 {
		m["spec"] = spec
	}
	st := kubeStatus(o.GetStatus())
	showStatusManagers(md, st)
	if len(st) > 0 {
		m["status"] = st
	}
	return m
}

func withVersion(apiVersion, version string) string {
	for i := len(apiVersion) - 1; i >= 0; i-- {
		if apiVersion[i] == '/' {
			return apiVersion[:i+1] + version
		}
	}
	return version
}

func kubeMeta(md *schemas.ObjectMeta) map[string]any {
	m := map[string]any{"name": md.GetName()}
	if md.GetNamespace() != "" {
		m["namespace"] = md.GetNamespace()
	}
	if md.GetUid() != "" {
		m["uid"] = md.GetUid()
	}
	m["resourceVersion"] = strconv.FormatUint(md.GetResourceVersion(), 10)
	if md.GetGeneration() > 0 {
		m["generation"] = md.GetGeneration()
	}
	if t := md.GetCreationTime(); t != nil {
		m["creationTimestamp"] = timestamp(t)
	}
	if t := md.GetDeletionTime(); t != nil {
		m["deletionTimestamp"] = timestamp(t)
	}
	if len(md.GetLabels()) > 0 {
		m["labels"] = stringMap(md.GetLabels())
	}
	if len(md.GetAnnotations()) > 0 {
		m["annotations"] = stringMap(md.GetAnnotations())
	}
	if len(md.GetFinalizers()) > 0 {
		m["finalizers"] = toAny(md.GetFinalizers())
	}
	// jetplane's own metadata stays where its manifests write it, so a
	// read object applies back unchanged.
	if md.GetGroup() != "" {
		m["group"] = md.GetGroup()
	}
	if len(md.GetDependsOn()) > 0 {
		deps := make([]any, len(md.GetDependsOn()))
		for i, d := range md.GetDependsOn() {
			dm := map[string]any{"kind": d.GetKind(), "name": d.GetName()}
			if d.GetNamespace() != "" {
				dm["namespace"] = d.GetNamespace()
			}
			deps[i] = dm
		}
		m["dependsOn"] = deps
	}
	return m
}

// kubeStatus is the status a reconciler recorded: its kind-specific
// details, with phase, conditions, observedGeneration and message where
// Kubernetes puts them.
func kubeStatus(st *schemas.Status) map[string]any {
	if st == nil {
		return nil
	}
	m := st.GetDetails().AsMap()
	if m == nil {
		m = map[string]any{}
	}
	if st.GetPhase() != "" {
		if _, ok := m["phase"]; !ok {
			m["phase"] = st.GetPhase()
		}
	}
	if st.GetObservedGeneration() > 0 {
		m["observedGeneration"] = st.GetObservedGeneration()
	}
	if st.GetMessage() != "" {
		if _, ok := m["message"]; !ok {
			m["message"] = st.GetMessage()
		}
	}
	if len(st.GetConditions()) > 0 {
		if _, ok := m["conditions"]; !ok {
			cs := make([]any, len(st.GetConditions()))
			for i, c := range st.GetConditions() {
				cm := map[string]any{"type": c.GetType(), "status": c.GetStatus()}
				if c.GetReason() != "" {
					cm["reason"] = c.GetReason()
				}
				if c.GetMessage() != "" {
					cm["message"] = c.GetMessage()
				}
				if t := c.GetLastTransitionTime(); t != nil {
					cm["lastTransitionTime"] = timestamp(t)
				}
				cs[i] = cm
			}
			m["conditions"] = cs
		}
	}
	return m
}

func timestamp(t *timestamppb.Timestamp) string {
	return t.AsTime().UTC().Format(time.RFC3339)
}

func stringMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func toAny(in []string) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}

// decodeValue reads one object in Kubernetes' shape, as parsed from JSON,
// through jetplane's manifest decoding (the same rules as every other
// write, and the same objects and errors as decoding json.Marshal(m);
// manifest.DecodeValue). Metadata that the server owns (resourceVersion,
// uid, creationTimestamp, managedFields) is dropped by that decoding; the
// caller reads resourceVersion before for preconditions.
func decodeValue(m map[string]any) (*schemas.Object, error) {
	objs, err := manifest.DecodeValue("request body", m)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%w: the body holds %d objects; send one", errBadRequest, len(objs))
	}
	return objs[0], nil
}

// bodyMeta is what a request body says of itself before decoding.
type bodyMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name            string `json:"name"`
		GenerateName    string `json:"generateName"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

func readMeta(body []byte) (bodyMeta, error) {
	var bm bodyMeta
	if err := json.Unmarshal(body, &bm); err != nil {
		return bm, fmt.Errorf("%w: the body is not a JSON object: %v", errBadRequest, err)
	}
	return bm, nil
}
