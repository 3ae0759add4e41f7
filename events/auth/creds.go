package auth

import (
	"bytes"
	"fmt"

	"github.com/nats-io/nkeys"
)

// A creds file is a decorated NKey seed, the form `nats --nkey` and
// nats.NkeyOptionFromSeed read, with comment lines naming the role, the
// name and the inbox prefix the connection must use
// (events.CredsOptions reads both).
func encode(kp nkeys.KeyPair, role Role, name string) ([]byte, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# jetplane NATS credential: role %s, name %s\n", role, name)
	fmt.Fprintf(&b, "# inbox-prefix: %s\n", InboxPrefix(role, name))
	b.WriteString("# Keep this file secret (mode 0600). Connect with the NKey seed below and\n")
	b.WriteString("# the inbox prefix above (nats CLI: --nkey FILE --inbox-prefix PREFIX).\n")
	b.WriteString("-----BEGIN USER NKEY SEED-----\n")
	b.Write(seed)
	b.WriteString("\n------END USER NKEY SEED------\n")
	return b.Bytes(), nil
}
