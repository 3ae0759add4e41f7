package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/jetplane/jetplane/schemas"
)

// Warnings says what an applied object asks for that jetplane accepts but
// cannot give, one sentence per field, so every client — the CLI, the
// console, any HTTP client — hears it at the point of use. A pod's
// container ports are the case: pods run as WebAssembly (WASI) modules,
// which have no network, so nothing can listen on a port.
func Warnings(o *schemas.Object) []string {
	if o.GetKind() != "Pod" || o.GetApiVersion() != "v1" {
		return nil
	}
	var out []string
	spec := o.GetSpec().GetFields()
	for _, list := range []string{"initContainers", "containers"} {
		for i, c := range spec[list].GetListValue().GetValues() {
			if len(c.GetStructValue().GetFields()["ports"].GetListValue().GetValues()) == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("Pod %s/%s: spec.%s[%d].ports: nothing will listen: jetplane runs containers as WebAssembly (WASI) modules, which have no network (a server in one fails, a Go one with \"all goroutines are asleep\")",
				o.GetMetadata().GetNamespace(), o.GetMetadata().GetName(), list, i))
		}
	}
	return out
}

// setWarnings puts warnings in the response headers as Kubernetes does
// (RFC 7234 warn-code 299), besides the body's warnings field.
func setWarnings(w http.ResponseWriter, warnings []string) {
	for _, s := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(s))
	}
}
