package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jetplane/jetplane/schemas"
)

// TestChangeDetail: history's DETAIL names the phase a status change moved
// to first, and shortening never splits a UTF-8 character.
func TestChangeDetail(t *testing.T) {
	ev := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED}
	long := strings.Repeat("é", 30)
	tests := []struct {
		name          string
		before, after stateView
		want          string
	}{
		{"first phase", stateView{Status: map[string]any{"goal": "exists"}}, stateView{Status: map[string]any{"goal": "exists", "phase": "Registered", "message": "accepted by the node"}},
			"phase: Registered, status.message +"},
		{"a phase change comes first", stateView{Status: map[string]any{"phase": "Starting", "message": "starting containers", "details": map[string]any{"reason": "ContainerCreating"}}},
			stateView{Status: map[string]any{"phase": "Running", "message": "running", "details": map[string]any{}}},
			"phase: Starting→Running, status.details.reason - (+1 more)"},
		{"multi-byte text is cut between characters", stateView{Status: map[string]any{"message": "a"}}, stateView{Status: map[string]any{"message": long}},
			"status.message: a→" + strings.Repeat("é", 19) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := changeDetail(ev, tt.before, tt.after)
			if got != tt.want || !utf8.ValidString(got) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	for n := 4; n < 12; n++ {
		if s := cutRunes("Running→Completed", n); !utf8.ValidString(s) || utf8.RuneCountInString(s) > n {
			t.Errorf("cutRunes(%d) = %q", n, s)
		}
	}
}

// A deletion's DETAIL names its propagation policy's finalizer.
func TestChangeDetailOfADeletion(t *testing.T) {
	plain := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED}
	fg := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, Object: &schemas.Object{Metadata: &schemas.ObjectMeta{Finalizers: []string{"foregroundDeletion"}}}}
	if got := changeDetail(plain, stateView{}, stateView{}); got != "goal: exists→deleted" {
		t.Errorf("background: %q", got)
	}
	if got := changeDetail(fg, stateView{}, stateView{}); got != "goal: exists→deleted, finalizers: foregroundDeletion" {
		t.Errorf("foreground: %q", got)
	}
}
