package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// elsewhere are kubectl verbs jetplane has no command for. Each answers
// with what jetplane offers instead, rather than "unknown command" or a
// suggestion of an unrelated verb (scale → state).
var elsewhere = []struct{ verb, answer string }{
	{"edit", `jetplane has no edit: change the manifest and run 'jetplane apply -f FILE'
('jetplane diff -f FILE' first shows what would change); every apply is an
event in the object's history`},
	{"exec", `pods run WebAssembly (WASI) modules, which have no shell or processes to exec
into; read a pod's output with 'jetplane logs POD' and its states with
'jetplane history Pod/NAMESPACE/NAME'`},
	{"top", `jetplane records no CPU or memory usage of pods; 'jetplane get Node NAME -o yaml'
shows a node's capacity and 'jetplane describe Pod/NAMESPACE/NAME' a pod's
requests and state`},
	{"port-forward", `WASI modules have no network, so a pod listens on no port and there is
nothing to forward (see "Pods" in the README)`},
	{"config", `jetplane has no kubeconfig: the server is --server (env JETPLANE_SERVER) and the
API token --token (env JETPLANE_TOKEN)`},
}

// newElsewhere makes the hidden commands of elsewhere: each fails with its
// answer, whatever its arguments and flags.
func newElsewhere() []*cobra.Command {
	var out []*cobra.Command
	for _, e := range elsewhere {
		answer := e.answer
		out = append(out, &cobra.Command{
			Use:                e.verb,
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("%s", answer)
			},
		})
	}
	return out
}
