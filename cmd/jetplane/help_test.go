package main

import (
	"bytes"
	"strings"
	"testing"
)

// Help prints flags' defaults: a token taken from the environment must
// not be one, or `--help` shows it to whoever looks at the terminal.
func TestHelpNeverPrintsTheToken(t *testing.T) {
	const token = "tok-very-secret-value"
	t.Setenv("JETPLANE_TOKEN", token)
	for _, args := range [][]string{{"--help"}, {"get", "--help"}, {"apply", "--help"}} {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), token) {
			t.Fatalf("jetplane %s prints the token:\n%s", strings.Join(args, " "), out.String())
		}
	}
	// The token still reaches the client.
	g := &globals{}
	if c := g.client(); c.Token != token {
		t.Fatalf("client token %q, want the one from JETPLANE_TOKEN", c.Token)
	}
}
