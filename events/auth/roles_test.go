package auth

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetplane/jetplane/events"
)

// matches reports whether subject matches pattern as NATS matches them,
// token by token, with * for one token and > for the rest.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range p {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || t != "*" && t != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// A controller acknowledges on (and unpins) its own partition consumers, under their
// names with its tag (decision 0122), since decision 0108 and before it
// (a controller built against an earlier jetplane), and on no other
// consumer of the log, another controller's tagged ones included.
func TestControllerAcknowledgesOnlyItsOwnConsumers(t *testing.T) {
	perms := ControllerPermissions("nets", "tagofnets")
	may := func(subject string) bool {
		allowed := slices.ContainsFunc(perms.Publish.Allow, func(p string) bool { return matches(p, subject) })
		denied := slices.ContainsFunc(perms.Publish.Deny, func(p string) bool { return matches(p, subject) })
		return allowed && !denied
	}
	ack := func(consumer string) string { return "$JS.ACK." + events.StreamName + "." + consumer + ".1.9.9.1.0" }
	unpin := func(consumer string) string { return "$JS.API.CONSUMER.UNPIN." + events.StreamName + "." + consumer }
	for _, c := range []string{
		events.PartitionConsumer(events.ControllerConsumers("nets", "tagofnets"), 3),
		events.PartitionConsumer(events.ControllerConsumerPrefix+"nets", 3),
		events.ExplicitAckPartitionConsumer(events.ControllerConsumerPrefix+"nets", 3),
	} {
		if !may(ack(c)) {
			t.Errorf("controller nets may not acknowledge on its own consumer %s", c)
		}
		if !may(unpin(c)) {
			t.Errorf("controller nets may not unpin its own consumer %s", c)
		}
	}
	for _, c := range []string{
		events.PartitionConsumer("", 3),
		events.PartitionConsumer(events.ControllerConsumerPrefix+"gadgets", 3),
		events.ExplicitAckPartitionConsumer(events.ControllerConsumerPrefix+"gadgets", 3),
		events.PartitionConsumer(events.ControllerConsumers("gadgets", "tagofgadgets"), 3),
		events.PartitionConsumer(events.ControllerConsumers("nets", "othertag"), 3),
		"some-subscribers-consumer",
	} {
		if may(ack(c)) {
			t.Errorf("controller nets may acknowledge on %s", c)
		}
		if may(unpin(c)) {
			t.Errorf("controller nets may unpin %s", c)
		}
	}
}

// No outside credential lists the consumers of a stream it reads.
func TestOutsideCredentialsListNoConsumers(t *testing.T) {
	for _, perms := range []*server.Permissions{SubscriberPermissions("audit"), ControllerPermissions("nets", "tagofnets")} {
		for _, s := range readStreams {
			for _, subj := range []string{"$JS.API.CONSUMER.NAMES." + s, "$JS.API.CONSUMER.LIST." + s} {
				if slices.ContainsFunc(perms.Publish.Allow, func(p string) bool { return matches(p, subj) }) {
					t.Errorf("may publish %s", subj)
				}
			}
		}
	}
}
