package kubeapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readAll reads what io.ReadAll reads, whatever length the request
// declares, and refuses bodies over maxBody as it did.
func TestReadAllReadsTheWholeBody(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	for _, declared := range []int64{-1, 0, 1, 10, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 5} {
		r := httptest.NewRequest("PUT", "/", strings.NewReader(body))
		r.ContentLength = declared
		got, err := readAll(httptest.NewRecorder(), r)
		if err != nil || string(got) != body {
			t.Errorf("declared %d: read %d bytes, %v; want the %d bytes sent", declared, len(got), err, len(body))
		}
	}
	r := httptest.NewRequest("PUT", "/", bytes.NewReader(make([]byte, maxBody+1)))
	var tooBig *http.MaxBytesError
	if _, err := readAll(httptest.NewRecorder(), r); !errors.As(err, &tooBig) {
		t.Errorf("a body over maxBody: %v, want *http.MaxBytesError", err)
	}
}
