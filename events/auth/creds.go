package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/jetplane/jetplane/events"
)

// A creds file is a decorated NKey seed, the form `nats --nkey` and
// nats.NkeyOptionFromSeed read, with comment lines naming the role, the
// name, the inbox prefix the connection must use (events.CredsOptions
// reads both) and, for a credential with a consumer tag, the prefix of
// its consumers' names (events.CredsConsumerPrefix).
func encode(kp nkeys.KeyPair, role Role, name, tag string) ([]byte, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# jetplane NATS credential: role %s, name %s\n", role, name)
	fmt.Fprintf(&b, "# inbox-prefix: %s\n", InboxPrefix(role, name))
	if p := ConsumerPrefix(role, name, tag); p != "" {
		fmt.Fprintf(&b, "%s%s\n", events.ConsumerPrefixComment, p)
		b.WriteString("# Name your consumers starting with the prefix above: no other credential\n")
		b.WriteString("# can list consumers, so one named so cannot be found by another.\n")
	}
	b.WriteString("# Keep this file secret (mode 0600). Connect with the NKey seed below and\n")
	b.WriteString("# the inbox prefix above (nats CLI: --nkey FILE --inbox-prefix PREFIX).\n")
	b.WriteString("-----BEGIN USER NKEY SEED-----\n")
	b.Write(seed)
	b.WriteString("\n------END USER NKEY SEED------\n")
	return b.Bytes(), nil
}

// newTag returns a consumer tag: 16 characters of lower-case base32,
// 80 random bits, which nobody guesses.
func newTag() (string, error) {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return strings.ToLower(base32.StdEncoding.EncodeToString(b)), nil
}

// ConsumerPrefix is what the names of the consumers of the credential
// role name with consumer tag tag start with (decision 0122): for a
// controller, the prefix of its partition consumers
// (events.ControllerConsumers); for a subscriber, its escaped name and
// its tag. No outside credential may list consumers, so a name that
// holds another's tag cannot be found. It is "" for a credential without
// a tag (issued before tags) and for the other roles.
func ConsumerPrefix(role Role, name, tag string) string {
	if tag == "" {
		return ""
	}
	switch role {
	case RoleController:
		return events.ControllerConsumers(name, tag)
	case RoleSubscriber:
		return events.EscapeToken(name) + "_" + tag
	}
	return ""
}
