package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas/kinds"
)

func widget(name string, deps ...string) string {
	var refs []string
	for _, d := range deps {
		refs = append(refs, d)
	}
	return "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + ", namespace: ns, dependsOn: [" + strings.Join(refs, ", ") + "]}\nspec: {}\n"
}

// TestDependsOnBareKind is issue 12's friction point: a dependsOn entry
// naming a bare kind ({kind: Widget, name: c2} for a Widget.example.com)
// matched nothing, so a cycle written that way was stored. The gate now
// resolves the kind as every command does, rejects the cycle, and stores
// references under the resolved kind.
func TestDependsOnBareKind(t *testing.T) {
	tests := []struct {
		name      string
		stored    string
		apply     string
		wantErr   error
		wantCycle string
		wantDep   string // the dependency's kind as stored
	}{
		{
			name:      "cycle through a stored object, bare kind",
			stored:    widget("c2", "{kind: Widget.example.com, name: c1}"),
			apply:     widget("c1", "{kind: Widget, name: c2}"),
			wantErr:   gate.ErrInvalid,
			wantCycle: "Widget.example.com/ns/c1 → Widget.example.com/ns/c2 → Widget.example.com/ns/c1",
		},
		{
			name:      "cycle within the batch",
			apply:     docs(widget("c1", "{kind: Widget, name: c2}"), widget("c2", "{kind: Widget, name: c1}")),
			wantErr:   gate.ErrInvalid,
			wantCycle: "Widget.example.com/ns/c1 → Widget.example.com/ns/c2 → Widget.example.com/ns/c1",
		},
		{
			name:    "bare kind stored resolved",
			stored:  widget("c2"),
			apply:   widget("c1", "{kind: Widget, name: c2}"),
			wantDep: "Widget.example.com",
		},
		{
			name:    "a kind nothing is stored of is kept as written",
			apply:   widget("c1", "{kind: Deployment, name: web}"),
			wantDep: "Deployment",
		},
		{
			name:    "a built-in kind stored in its usual group",
			stored:  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns}\n",
			apply:   widget("c1", "{kind: Deployment, name: web}"),
			wantDep: "Deployment.apps",
		},
		{
			name:    "an unknown kind is kept as written: its object may come later",
			apply:   widget("c1", "{kind: Gizmo, name: g}"),
			wantDep: "Gizmo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.stored != "" {
				e.apply(t, "user/alice", tt.stored, "")
			}
			before := e.count(t)
			_, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), decode(t, tt.apply), "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if !strings.Contains(err.Error(), tt.wantCycle) {
					t.Errorf("error %q does not name the cycle %q", err, tt.wantCycle)
				}
				if after := e.count(t); after != before {
					t.Errorf("a rejected apply wrote %d events", after-before)
				}
				return
			}
			o := e.store.Get(projections.Key{Kind: "Widget.example.com", Namespace: "ns", Name: "c1"})
			if got := o.GetMetadata().GetDependsOn()[0].GetKind(); got != tt.wantDep {
				t.Errorf("dependsOn kind stored as %q, want %q", got, tt.wantDep)
			}
		})
	}
}

func TestDependsOnAmbiguousKind(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", "apiVersion: a.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: ns}\n---\napiVersion: b.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: ns}\n", "")
	_, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), decode(t, widget("c1", "{kind: Gadget, name: g}")), "")
	if !errors.Is(err, gate.ErrInvalid) || !strings.Contains(err.Error(), "Gadget.a.example.com, Gadget.b.example.com") {
		t.Fatalf("err %v, want an ambiguity naming both groups", err)
	}
	if _, err := kinds.Resolve("Gadget", e.store.Kinds()); !errors.Is(err, kinds.ErrAmbiguous) {
		t.Fatalf("resolver disagrees with the gate: %v", err)
	}
}

// TestIdempotencyKeyWithChangedBody is issue 12's friction point: the same
// key with a changed body said "configured" and stored nothing. It is now
// ErrIdempotencyMismatch, and the same body under the key still succeeds.
func TestIdempotencyKeyWithChangedBody(t *testing.T) {
	for _, tt := range []struct{ name, first, changed string }{
		{"one object", configMap("web", "app: web", "a: '1'"), configMap("web", "app: web", "a: '2'")},
		{"an atomic batch", docs(configMap("web", "app: web", "a: '1'"), configMap("api", "app: api", "a: '1'")),
			docs(configMap("web", "app: web", "a: '2'"), configMap("api", "app: api", "a: '2'"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.apply(t, "user/alice", tt.first, "k1")
			before := e.count(t)
			_, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), decode(t, tt.changed), "k1")
			if !errors.Is(err, gate.ErrIdempotencyMismatch) {
				t.Fatalf("err %v, want ErrIdempotencyMismatch", err)
			}
			if after := e.count(t); after != before {
				t.Errorf("the refused apply wrote %d events", after-before)
			}
			if got := e.store.Get(webKey).GetSpec().GetFields()["data"].GetStructValue().GetFields()["a"].GetStringValue(); got != "1" {
				t.Errorf("stored data.a = %q, want the first request's 1", got)
			}
			// A new key applies the change.
			out := e.apply(t, "user/alice", tt.changed, "k2")
			if out[0].Action != gate.Configured {
				t.Errorf("with a new key: %s, want configured", out[0].Action)
			}
		})
	}
}

func TestDryRun(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")
	before := e.count(t)
	out, err := e.gate.DryRun(context.Background(), gate.Admin("user/alice"), decode(t, docs(configMap("web", "app: web", "a: '2'"), configMap("api", "app: api", "a: '1'"), configMap("same", "", ""))))
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Action != gate.Configured || out[0].Previous == nil || out[0].Object.GetMetadata().GetGeneration() != 2 {
		t.Errorf("web: %s, previous %v, generation %d; want configured at generation 2", out[0].Action, out[0].Previous != nil, out[0].Object.GetMetadata().GetGeneration())
	}
	if out[1].Action != gate.Created || out[1].Previous != nil {
		t.Errorf("api: %s, want created", out[1].Action)
	}
	if after := e.count(t); after != before {
		t.Errorf("a dry run wrote %d events", after-before)
	}
	if _, err := e.gate.DryRun(context.Background(), gate.Admin("user/alice"), decode(t, docs(dependent("a", "b"), dependent("b", "a")))); !errors.Is(err, gate.ErrInvalid) {
		t.Errorf("a dry run of a cycle: %v, want ErrInvalid", err)
	}
}
