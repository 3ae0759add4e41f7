package kubeapi

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/schemas"
)

// maxBody bounds a request body: an object is at most 1 MiB encoded
// (DESIGN "Object model"); a little more lets the gate name the limit.
const maxBody = 3 << 20

// droppedMetadata is metadata Kubernetes clients send that jetplane does
// not keep: the server sets it, or jetplane records it elsewhere.
// managedFields are kept in an annotation (storeManagedFields).
var droppedMetadata = []string{"generateName", "ownerReferences", "selfLink"}

// readAll reads r's body, at most maxBody bytes, into a buffer of the
// size the request declares (io.ReadAll grows one from 512 bytes).
func readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		// +1: the read that finds the end. A declared length is not
		// trusted with memory before the bytes come: past 64 KiB the
		// buffer grows as they do.
		b := make([]byte, 0, min(n, 64<<10)+1)
		for {
			m, err := body.Read(b[len(b):cap(b)])
			b = b[:len(b)+m]
			if err == io.EOF {
				return b, nil
			}
			if err != nil {
				return b, err
			}
			if len(b) == cap(b) {
				// Longer than declared, or than the first buffer: the
				// rest as io.ReadAll reads it.
				rest, err := io.ReadAll(body)
				return append(b, rest...), err
			}
		}
	}
	return io.ReadAll(body)
}

func readBody(w http.ResponseWriter, q *request) (map[string]any, error) {
	b, err := readAll(w, q.r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
		}
		return nil, err
	}
	if ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type")); ct == protobufType {
		// client-go's typed clients send built-in kinds as protobuf.
		return fromProtobuf(b)
	}
	var m map[string]any
	if err := jsonvalue.Unmarshal(b, &m); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return m, nil
}

const protobufType = "application/vnd.kubernetes.protobuf"

var protobufCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// fromProtobuf decodes a built-in kind sent as protobuf into the JSON
// shape the rest of the server reads.
func fromProtobuf(b []byte) (map[string]any, error) {
	obj, gvk, err := protobufCodec.Decode(b, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest("the protobuf body does not decode: " + err.Error())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	// Typed objects carry empty spec and status; an empty spec of a kind
	// with content fields would be refused as a second place for them.
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	return m, nil
}

func metaOf(m map[string]any) map[string]any {
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		m["metadata"] = md
	}
	return md
}

// prepare checks a body against the request's path (namespace, name,
// kind), fills in what the path implies, and decodes it as a manifest.
// It returns the object and the resourceVersion the body names ("" when
// none).
func (s *Server) prepare(q *request, m map[string]any) (*schemas.Object, string, error) {
	md := metaOf(m)
	if q.res.namespaced {
		ns, _ := md["namespace"].(string)
		switch {
		case ns == "":
			md["namespace"] = q.namespace
		case q.namespace != "" && ns != q.namespace:
			return nil, "", apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace of the request (%s)", ns, q.namespace))
		}
		if md["namespace"] == "" {
			return nil, "", apierrors.NewBadRequest("a namespaced object needs a namespace")
		}
		q.namespace, _ = md["namespace"].(string)
	}
	name, _ := md["name"].(string)
	if gen, _ := md["generateName"].(string); name == "" && gen != "" {
		name = gen + randomSuffix()
		md["name"] = name
	}
	if q.name != "" && name != q.name {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, q.name))
	}
	q.name = name
	if k, _ := m["kind"].(string); k != q.res.kind {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("kind %q does not match the resource %s (kind %s)", k, q.res.plural, q.res.kind))
	}
	if v, _ := m["apiVersion"].(string); v != q.res.groupVersion() {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("apiVersion %q does not match the request's %s", v, q.res.groupVersion()))
	}
	rv, _ := md["resourceVersion"].(string)
	for _, f := range droppedMetadata {
		delete(md, f)
	}
	if err := storeManagedFields(md); err != nil {
		return nil, "", err
	}
	delete(m, "status")
	if ann, ok := md["annotations"].(map[string]any); ok && len(ann) == 0 {
		delete(md, "annotations")
	}
	// Decoded from the value as read, not from its text again.
	o, err := decodeValue(m)
	return o, rv, err
}

func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func dryRun(r *http.Request) bool {
	for _, v := range r.URL.Query()["dryRun"] {
		if v == "All" {
			return true
		}
	}
	return false
}

// write sends o through the gate (or its dry run) and answers with the
// object as stored.
func (s *Server) write(w http.ResponseWriter, q *request, o *schemas.Object, code int) error {
	out, err := s.store(q, o)
	if err != nil {
		return err
	}
	// What the object asks for that cannot work here, as the Kubernetes
	// API says it: kubectl prints these headers as warnings.
	for _, m := range out.Warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(m))
	}
	if !dryRun(q.r) {
		// Built and encoded once with the watch event of the same write.
		return s.showJSON(w, q, code, out.Object)
	}
	obj := s.show(q, out.Object)
	if prev := out.Previous; prev != nil {
		// Nothing was written: the version is still the current one.
		obj["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(prev.GetMetadata().GetResourceVersion(), 10)
	}
	return writeJSON(w, code, obj)
}

// gateError names the resource in the gate's refusals.
func (s *Server) gateError(q *request, err error) error {
	switch {
	case errors.Is(err, gate.ErrForbidden):
		return apierrors.NewForbidden(q.groupResource(), q.name, err)
	case errors.Is(err, gate.ErrInvalid):
		return apierrors.NewBadRequest(err.Error())
	}
	return err
}

func (s *Server) create(w http.ResponseWriter, q *request) error {
	m, err := readBody(w, q)
	if err != nil {
		return err
	}
	s.track(q, nil, m)
	o, _, err := s.prepare(q, m)
	if err != nil {
		return err
	}
	if s.cfg.Store.Get(q.key()) != nil {
		return apierrors.NewAlreadyExists(q.groupResource(), q.name)
	}
	return s.write(w, q, o, http.StatusCreated)
}

// checkVersion refuses a write whose body names a resourceVersion other
// than the current one, as Kubernetes does.
func (s *Server) checkVersion(q *request, cur *schemas.Object, rv string) error {
	if rv == "" || rv == strconv.FormatUint(cur.GetMetadata().GetResourceVersion(), 10) {
		return nil
	}
	return apierrors.NewConflict(q.groupResource(), q.name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

func (s *Server) update(w http.ResponseWriter, q *request) error {
	m, err := readBody(w, q)
	if err != nil {
		return err
	}
	cur := s.cfg.Store.Get(q.key())
	if cur != nil {
		s.track(q, s.shown(q, cur), m)
	}
	o, rv, err := s.prepare(q, m)
	if err != nil {
		return err
	}
	if cur == nil {
		return apierrors.NewNotFound(q.groupResource(), q.name)
	}
	if err := s.checkVersion(q, cur, rv); err != nil {
		return err
	}
	return s.write(w, q, o, http.StatusOK)
}

func (s *Server) patch(w http.ResponseWriter, q *request) error {
	patch, err := readAll(w, q.r)
	if err != nil {
		return err
	}
	ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	cur := s.cfg.Store.Get(q.key())
	if ct == "application/apply-patch+yaml" {
		return s.serverSideApply(w, q, cur, patch)
	}
	if cur == nil {
		return apierrors.NewNotFound(q.groupResource(), q.name)
	}
	live := s.shown(q, cur) // read-only
	orig, err := jsonvalue.Marshal(live)
	if err != nil {
		return err
	}
	var typed any
	if t, err := scheme.Scheme.New(kindOf(q.res)); err == nil && q.res.def == nil {
		typed = t
	}
	patched, err := applyPatch(q, ct, orig, patch, typed)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := jsonvalue.Unmarshal(patched, &m); err != nil {
		return apierrors.NewBadRequest("patch: " + err.Error())
	}
	s.track(q, live, m)
	o, rv, err := s.prepare(q, m)
	if err != nil {
		return err
	}
	if err := s.checkVersion(q, cur, rv); err != nil {
		return err
	}
	return s.write(w, q, o, http.StatusOK)
}

func (s *Server) delete(w http.ResponseWriter, q *request) error {
	cur := s.cfg.Store.Get(q.key())
	if cur == nil {
		return apierrors.NewNotFound(q.groupResource(), q.name)
	}
	var opts metav1.DeleteOptions
	if b, _ := readAll(w, q.r); len(strings.TrimSpace(string(b))) > 0 {
		if ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type")); ct == protobufType {
			// client-go's typed clients send DeleteOptions as protobuf.
			if _, _, err := protobufCodec.Decode(b, nil, &opts); err != nil {
				return apierrors.NewBadRequest("the body is not DeleteOptions: " + err.Error())
			}
		} else if err := json.Unmarshal(b, &opts); err != nil {
			return apierrors.NewBadRequest("the body is not DeleteOptions: " + err.Error())
		}
	}
	if pre := opts.Preconditions; pre != nil {
		if pre.UID != nil && string(*pre.UID) != cur.GetMetadata().GetUid() {
			return apierrors.NewConflict(q.groupResource(), q.name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s); the object might have been deleted and then recreated", *pre.UID, cur.GetMetadata().GetUid()))
		}
		if pre.ResourceVersion != nil {
			if err := s.checkVersion(q, cur, *pre.ResourceVersion); err != nil {
				return err
			}
		}
	}
	if dryRun(q.r) || len(opts.DryRun) > 0 && opts.DryRun[0] == "All" {
		if err := gate.Authorize(q.caller.Principal, gate.VerbDelete, gate.Target{Kind: q.res.key(), Namespace: q.namespace, Name: q.name, ClusterScoped: !q.res.namespaced, Exists: true}); err != nil {
			return s.gateError(q, err)
		}
		return writeJSON(w, http.StatusOK, s.show(q, cur))
	}
	prop, err := propagation(q, opts)
	if err != nil {
		return err
	}
	out, err := s.cfg.Gate.DeleteWith(q.r.Context(), q.caller.Principal, q.key(), "", prop)
	if err != nil {
		return s.gateError(q, err)
	}
	if out.Object != nil && s.cfg.Store.Get(q.key()) != nil {
		// Finalizers still run: the object stays, with its
		// deletionTimestamp, as Kubernetes answers.
		return writeJSON(w, http.StatusOK, s.show(q, s.cfg.Store.Get(q.key())))
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: q.name, Group: q.res.group, Kind: q.res.plural, UID: typesUID(cur)}}
	return writeJSON(w, http.StatusOK, &st)
}

// propagation is what the deletion does to the object's dependents:
// DeleteOptions' propagationPolicy (or the older orphanDependents), also
// accepted as a query parameter as the apiserver does; Background when
// neither is given (decision 0071).
func propagation(q *request, opts metav1.DeleteOptions) (gate.Propagation, error) {
	policy := ""
	if opts.PropagationPolicy != nil {
		policy = string(*opts.PropagationPolicy)
	} else if p := q.r.URL.Query().Get("propagationPolicy"); p != "" {
		policy = p
	}
	orphan := opts.OrphanDependents
	if orphan == nil {
		if v, err := strconv.ParseBool(q.r.URL.Query().Get("orphanDependents")); err == nil {
			orphan = &v
		}
	}
	if orphan != nil {
		if policy != "" {
			return "", apierrors.NewBadRequest("DeleteOptions: orphanDependents and propagationPolicy may not both be set")
		}
		if *orphan {
			policy = string(metav1.DeletePropagationOrphan)
		}
	}
	switch metav1.DeletionPropagation(policy) {
	case "", metav1.DeletePropagationBackground:
		return gate.Background, nil
	case metav1.DeletePropagationForeground:
		return gate.Foreground, nil
	case metav1.DeletePropagationOrphan:
		return gate.Orphan, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("DeleteOptions: propagationPolicy %q: use Background, Foreground or Orphan", policy))
}

// serverSideApply takes a server-side apply (kubectl apply --server-side):
// the configuration is merged into the object, which is created when
// absent, with field ownership and conflicts (managed.go).
func (s *Server) serverSideApply(w http.ResponseWriter, q *request, cur *schemas.Object, body []byte) error {
	config, err := yaml.YAMLToJSON(body)
	if err != nil {
		return apierrors.NewBadRequest("apply: the body is not YAML or JSON: " + err.Error())
	}
	var c map[string]any
	if err := jsonvalue.Unmarshal(config, &c); err != nil {
		return apierrors.NewBadRequest("apply: the body is not an object: " + err.Error())
	}
	code := http.StatusCreated
	var live map[string]any
	if cur != nil {
		live, code = s.show(q, cur), http.StatusOK
	}
	md := metaOf(c)
	if q.res.namespaced && md["namespace"] == nil && q.namespace != "" {
		md["namespace"] = q.namespace
	}
	rv, _ := md["resourceVersion"].(string)
	m, err := s.applied(q, live, c)
	if err != nil {
		return err
	}
	metaOf(m)["resourceVersion"] = rv
	o, _, err := s.prepare(q, m)
	if err != nil {
		return err
	}
	if cur != nil {
		if err := s.checkVersion(q, cur, rv); err != nil {
			return err
		}
	}
	return s.write(w, q, o, code)
}
