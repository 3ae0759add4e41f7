// Package subscription holds the rules of the Subscription kind: its spec,
// decoded and checked with errors naming the field, which changes a
// subscription selects, and the CloudEvents 1.0 form in which jetplane hands
// a change to an outside system, with its HMAC-SHA256 signature. The
// reconciler that delivers (reconcilers/subscription) and `jetplane
// subscribe` both use it, so a sink and a script see the same events.
//
// It is pure: no I/O, no state.
package subscription

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetplane/jetplane/schemas"
)

// Kind is the kind's name, as keys hold it.
const Kind = "Subscription"

// Defaults.
const (
	DefaultMaxInFlight = 16
	MaxMaxInFlight     = 256
	DefaultFailAfter   = 24 * time.Hour
)

// Content modes of CloudEvents over HTTP.
const (
	Structured = "structured"
	Binary     = "binary"
)

// FieldError is a spec that cannot be used; Field is the path from the
// object ("spec.sink.url").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// SecretRef names a key of a Secret in the subscription's namespace.
type SecretRef struct{ Name, Key string }

// Start is where a subscription begins: after a sequence, at a time, or
// with the first change after it was created (Now).
type Start struct {
	Now      bool
	Sequence uint64 // deliver changes after this sequence
	Time     time.Time
}

// Spec is a Subscription's spec, decoded and checked.
type Spec struct {
	// Sink is where changes are POSTed: https, or http with AllowHTTP.
	Sink      *url.URL
	AllowHTTP bool
	// Mode is Structured (the default) or Binary.
	Mode string
	// SigningKey names the Secret key whose bytes sign each delivery
	// (HMAC-SHA256); nil sends unsigned deliveries.
	SigningKey *SecretRef
	Filter     Filter
	Start      Start
	// MaxInFlight bounds the deliveries outstanding at once (different
	// objects; one object's changes go one at a time, in order).
	MaxInFlight int
	// FailAfter is how long the sink may keep failing before the
	// subscription turns Failed, keeping its place.
	FailAfter time.Duration
}

// Filter selects changes. Empty lists select everything.
type Filter struct {
	// Kinds as keys name them ("ConfigMap", "Deployment.apps").
	Kinds      []string
	Namespaces []string
	Labels     labels.Selector
	// Types are event types as the log names them (Applied,
	// DeleteRequested, Observed, StatusChanged, Bound, Finalized).
	Types []schemas.EventType
}

// TypeNames maps the event types' names in a spec to the log's types.
var TypeNames = map[string]schemas.EventType{
	"Applied":         schemas.EventType_EVENT_TYPE_APPLIED,
	"DeleteRequested": schemas.EventType_EVENT_TYPE_DELETE_REQUESTED,
	"Observed":        schemas.EventType_EVENT_TYPE_OBSERVED,
	"StatusChanged":   schemas.EventType_EVENT_TYPE_STATUS_CHANGED,
	"Bound":           schemas.EventType_EVENT_TYPE_BOUND,
	"Finalized":       schemas.EventType_EVENT_TYPE_FINALIZED,
}

// TypeName is the name of t as specs and CloudEvents write it.
func TypeName(t schemas.EventType) string {
	for n, v := range TypeNames {
		if v == t {
			return n
		}
	}
	return t.String()
}

// Decode reads and checks a Subscription's spec. Its errors are
// *FieldError, joined when there are several.
func Decode(spec *structpb.Struct) (*Spec, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fieldErr(field, format, args...))
	}
	m := spec.AsMap()
	known := map[string]bool{"sink": true, "filter": true, "start": true, "maxInFlight": true, "failAfter": true}
	for k := range m {
		if !known[k] {
			bad("spec."+k, "unknown field; a Subscription's spec has sink, filter, start, maxInFlight and failAfter")
		}
	}
	s := &Spec{Mode: Structured, MaxInFlight: DefaultMaxInFlight, FailAfter: DefaultFailAfter, Start: Start{Now: true}}

	sink, _ := m["sink"].(map[string]any)
	if sink == nil {
		bad("spec.sink", "required: {url: https://...}")
	} else {
		for k := range sink {
			switch k {
			case "url", "allowHTTP", "mode", "signingSecret":
			default:
				bad("spec.sink."+k, "unknown field; a sink has url, allowHTTP, mode and signingSecret")
			}
		}
		if b, ok := sink["allowHTTP"].(bool); ok {
			s.AllowHTTP = b
		} else if sink["allowHTTP"] != nil {
			bad("spec.sink.allowHTTP", "must be true or false")
		}
		raw, _ := sink["url"].(string)
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			bad("spec.sink.url", "required: the https:// address changes are POSTed to")
		case err != nil || u.Host == "":
			bad("spec.sink.url", "%q is not an absolute URL", raw)
		case u.Scheme == "http" && !s.AllowHTTP:
			bad("spec.sink.url", "http:// sends changes in clear text; use https://, or set spec.sink.allowHTTP: true")
		case u.Scheme != "https" && u.Scheme != "http":
			bad("spec.sink.url", "scheme %q is not https or http", u.Scheme)
		case u.User != nil:
			bad("spec.sink.url", "credentials in the URL would be stored in the log; sign deliveries with spec.sink.signingSecret instead")
		default:
			s.Sink = u
		}
		if mode, ok := sink["mode"].(string); ok {
			if mode != Structured && mode != Binary {
				bad("spec.sink.mode", "%q is not structured or binary", mode)
			}
			s.Mode = mode
		}
		if ref, ok := sink["signingSecret"].(map[string]any); ok {
			name, _ := ref["name"].(string)
			key, _ := ref["key"].(string)
			if name == "" || key == "" {
				bad("spec.sink.signingSecret", "needs name and key of a Secret in the subscription's namespace")
			} else {
				s.SigningKey = &SecretRef{Name: name, Key: key}
			}
		} else if sink["signingSecret"] != nil {
			bad("spec.sink.signingSecret", "must be {name: SECRET, key: KEY}")
		}
	}

	if f, ok := m["filter"].(map[string]any); ok {
		for k := range f {
			switch k {
			case "kinds", "namespaces", "labelSelector", "eventTypes":
			default:
				bad("spec.filter."+k, "unknown field; a filter has kinds, namespaces, labelSelector and eventTypes")
			}
		}
		s.Filter.Kinds = strings_(f["kinds"], "spec.filter.kinds", bad)
		s.Filter.Namespaces = strings_(f["namespaces"], "spec.filter.namespaces", bad)
		if sel, ok := f["labelSelector"].(string); ok && sel != "" {
			parsed, err := labels.Parse(sel)
			if err != nil {
				bad("spec.filter.labelSelector", "%v", err)
			}
			s.Filter.Labels = parsed
		}
		for i, t := range strings_(f["eventTypes"], "spec.filter.eventTypes", bad) {
			v, ok := TypeNames[t]
			if !ok {
				bad(fmt.Sprintf("spec.filter.eventTypes[%d]", i), "%q is not an event type (Applied, DeleteRequested, Observed, StatusChanged, Bound, Finalized)", t)
				continue
			}
			s.Filter.Types = append(s.Filter.Types, v)
		}
	} else if m["filter"] != nil {
		bad("spec.filter", "must be a map with kinds, namespaces, labelSelector and eventTypes")
	}

	switch v := m["start"].(type) {
	case nil:
	case string:
		st, err := ParseStart(v)
		if err != nil {
			bad("spec.start", "%v", err)
		}
		s.Start = st
	case float64:
		if v < 0 || v != float64(uint64(v)) {
			bad("spec.start", "a sequence must be a whole number >= 0")
		} else {
			s.Start = Start{Sequence: uint64(v)}
		}
	default:
		bad("spec.start", "must be now, a log sequence or an RFC 3339 time")
	}

	if v, ok := m["maxInFlight"]; ok {
		n, isNum := v.(float64)
		if !isNum || n < 1 || n > MaxMaxInFlight || n != float64(int(n)) {
			bad("spec.maxInFlight", "must be a whole number from 1 to %d", MaxMaxInFlight)
		} else {
			s.MaxInFlight = int(n)
		}
	}
	if v, ok := m["failAfter"]; ok {
		str, _ := v.(string)
		d, err := time.ParseDuration(str)
		if err != nil || d < time.Second {
			bad("spec.failAfter", "must be a duration of at least 1s, such as 30m or 24h")
		} else {
			s.FailAfter = d
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// ParseStart reads a start point: "now", a log sequence, or an RFC 3339
// time.
func ParseStart(v string) (Start, error) {
	if v == "" || v == "now" {
		return Start{Now: true}, nil
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return Start{Sequence: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return Start{Time: t}, nil
	}
	return Start{}, fmt.Errorf("%q is not now, a log sequence or an RFC 3339 time (2026-01-02T15:04:05Z)", v)
}

func strings_(v any, field string, bad func(string, string, ...any)) []string {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		bad(field, "must be a list of strings")
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok || strings.TrimSpace(s) == "" {
			bad(fmt.Sprintf("%s[%d]", field, i), "must be a non-empty string")
			continue
		}
		out = append(out, s)
	}
	return out
}

// Match reports whether a change selects: key is the object's, objLabels its
// labels after the change (before it, for a deletion), typ the event's.
func (f Filter) Match(kind, namespace string, objLabels map[string]string, typ schemas.EventType) bool {
	if len(f.Kinds) > 0 && !matchKind(f.Kinds, kind) {
		return false
	}
	if len(f.Namespaces) > 0 && !contains(f.Namespaces, namespace) {
		return false
	}
	if len(f.Types) > 0 && !containsType(f.Types, typ) {
		return false
	}
	if f.Labels != nil && !f.Labels.Matches(labels.Set(objLabels)) {
		return false
	}
	return true
}

// matchKind compares as the projection does: a kind without a group in the
// filter ("Deployment") matches it in every group.
func matchKind(want []string, kind string) bool {
	for _, w := range want {
		if w == kind || (!strings.Contains(w, ".") && strings.HasPrefix(kind, w+".")) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}

func containsType(list []schemas.EventType, v schemas.EventType) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}
