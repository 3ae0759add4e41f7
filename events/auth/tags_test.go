package auth

import (
	"strings"
	"testing"

	"github.com/jetplane/jetplane/events"
)

// Errors and logs show a consumer's name without its credential's tag:
// a pod's logs may be read by other credentials.
func TestShownConsumerHidesTheTag(t *testing.T) {
	for range 100 {
		tag, err := newTag()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{
			events.PartitionConsumer(ConsumerPrefix(RoleController, "widgets", tag), 3),
			ConsumerPrefix(RoleSubscriber, "audit.team-a", tag) + "_orders",
		} {
			if shown := events.ShownConsumer(name); strings.Contains(shown, tag) || !strings.Contains(shown, "…") {
				t.Fatalf("%s shown as %s", name, shown)
			}
		}
	}
	for _, name := range []string{"jp-ctl-widgets_3", "jp-reconcilers_0", "audit"} {
		if shown := events.ShownConsumer(name); shown != name {
			t.Errorf("%s shown as %s", name, shown)
		}
	}
}

// A subscriber whose consumers' names could not fit JetStream's 255
// characters is refused when its credential is made, naming the fix.
func TestSubscriberNameLeavesRoomForItsConsumers(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(RoleSubscriber, strings.Repeat("a", 180)); err != nil {
		t.Fatalf("a name of 180 characters: %v", err)
	}
	_, err = s.Create(RoleSubscriber, strings.Repeat("é", 100))
	if err == nil || !strings.Contains(err.Error(), "shorter name") {
		t.Fatalf("a name escaped past the limit: %v", err)
	}
}
