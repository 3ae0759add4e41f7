package api

import (
	"net/http"
	"strconv"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/schemas"
)

// Warnings says what an applied object asks for that jetplane accepts but
// cannot give; the gate decides them (gate.Warnings) and returns them with
// each outcome.
func Warnings(o *schemas.Object) []string { return gate.Warnings(o) }

// setWarnings puts warnings in the response headers as Kubernetes does
// (RFC 7234 warn-code 299), besides the body's warnings field.
func setWarnings(w http.ResponseWriter, warnings []string) {
	for _, s := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(s))
	}
}
