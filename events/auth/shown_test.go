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
