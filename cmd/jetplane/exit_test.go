package main

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jetplane/jetplane/bridge/api"
)

func TestExitCode(t *testing.T) {
	apiErr := func(code int) error { return &api.APIError{Code: code, ErrorResponse: api.ErrorResponse{Error: "x"}} }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"other", errors.New("boom"), 1},
		{"unreachable", fmt.Errorf("%w: down", api.ErrUnreachable), 1},
		{"usage", usage(errors.New("bad")), 2},
		{"cobra flag", errors.New("unknown flag: --nope"), 2},
		{"not found", apiErr(http.StatusNotFound), 3},
		{"wrapped not found", fmt.Errorf("get: %w", apiErr(http.StatusNotFound)), 3},
		{"conflict", apiErr(http.StatusConflict), 4},
		{"idempotency mismatch", apiErr(http.StatusUnprocessableEntity), 1},
		{"bad request", apiErr(http.StatusBadRequest), 1},
		{"own code", codeError{code: 3, err: errors.New("x")}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(tt.err); got != tt.want {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
