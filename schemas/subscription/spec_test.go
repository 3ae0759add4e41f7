package subscription

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

func spec(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecode(t *testing.T) {
	sink := map[string]any{"url": "https://hooks.example.com/x"}
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string // a field path in the error; "" for none
	}{
		{name: "minimal", spec: map[string]any{"sink": sink}},
		{name: "no sink", spec: map[string]any{}, wantErr: "spec.sink: required"},
		{name: "http without opt-in", spec: map[string]any{"sink": map[string]any{"url": "http://h/x"}}, wantErr: "spec.sink.url: http:// sends changes in clear text"},
		{name: "http with opt-in", spec: map[string]any{"sink": map[string]any{"url": "http://h/x", "allowHTTP": true}}},
		{name: "credentials in url", spec: map[string]any{"sink": map[string]any{"url": "https://u:p@h/x"}}, wantErr: "spec.sink.url: credentials"},
		{name: "bad mode", spec: map[string]any{"sink": map[string]any{"url": "https://h", "mode": "batch"}}, wantErr: "spec.sink.mode"},
		{name: "unknown field", spec: map[string]any{"sink": sink, "fliter": map[string]any{}}, wantErr: "spec.fliter: unknown field"},
		{name: "bad type", spec: map[string]any{"sink": sink, "filter": map[string]any{"eventTypes": []any{"Created"}}}, wantErr: "spec.filter.eventTypes[0]"},
		{name: "bad selector", spec: map[string]any{"sink": sink, "filter": map[string]any{"labelSelector": "a in (("}}, wantErr: "spec.filter.labelSelector"},
		{name: "start sequence", spec: map[string]any{"sink": sink, "start": 12.0}},
		{name: "start time", spec: map[string]any{"sink": sink, "start": "2026-01-02T15:04:05Z"}},
		{name: "bad start", spec: map[string]any{"sink": sink, "start": "yesterday"}, wantErr: "spec.start"},
		{name: "maxInFlight out of range", spec: map[string]any{"sink": sink, "maxInFlight": 1000.0}, wantErr: "spec.maxInFlight"},
		{name: "failAfter too short", spec: map[string]any{"sink": sink, "failAfter": "10ms"}, wantErr: "spec.failAfter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(spec(t, tt.spec))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var fe *FieldError
			if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode = %v; want a *FieldError with %q", err, tt.wantErr)
			}
		})
	}
}

func TestFilterMatch(t *testing.T) {
	s, err := Decode(spec(t, map[string]any{"sink": map[string]any{"url": "https://h"}, "filter": map[string]any{
		"kinds": []any{"Deployment", "ConfigMap"}, "namespaces": []any{"shop"}, "labelSelector": "app=web", "eventTypes": []any{"Applied"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	web := map[string]string{"app": "web"}
	applied := schemas.EventType_EVENT_TYPE_APPLIED
	tests := []struct {
		kind, ns string
		labels   map[string]string
		typ      schemas.EventType
		want     bool
	}{
		{"Deployment.apps", "shop", web, applied, true}, // a kind without a group matches it in every group
		{"ConfigMap", "shop", web, applied, true},
		{"Secret", "shop", web, applied, false},
		{"ConfigMap", "other", web, applied, false},
		{"ConfigMap", "shop", map[string]string{"app": "db"}, applied, false},
		{"ConfigMap", "shop", web, schemas.EventType_EVENT_TYPE_STATUS_CHANGED, false},
	}
	for _, tt := range tests {
		if got := s.Filter.Match(tt.kind, tt.ns, tt.labels, tt.typ); got != tt.want {
			t.Errorf("Match(%s, %s, %v, %v) = %v, want %v", tt.kind, tt.ns, tt.labels, tt.typ, got, tt.want)
		}
	}
}

func TestSignatureVerifies(t *testing.T) {
	key := []byte("k")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"a":1}`)
	h := Sign(key, now, body)
	if err := Verify(key, h, body, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]error{
		"other body": Verify(key, h, []byte(`{"a":2}`), now, time.Minute),
		"other key":  Verify([]byte("x"), h, body, now, time.Minute),
		"replayed":   Verify(key, h, body, now.Add(time.Hour), time.Minute),
		"garbled":    Verify(key, "v1=zz", body, now, time.Minute),
	} {
		if !errors.Is(check, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, check)
		}
	}
}
