package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The server serves a request the way its mux would: a route without
// wildcards sees its pattern, one with wildcards its path values too, and
// a path not in canonical form is redirected to it.
func TestServeHTTPServesAsTheMux(t *testing.T) {
	s := &Server{mux: http.NewServeMux()}
	echo := func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Pattern + "|" + r.PathValue("kind")))
	}
	s.mux.HandleFunc("/apis/", echo)
	s.mux.HandleFunc("GET /v1/objects/{kind}", echo)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/apis/bench.example.dev/v1/namespaces/a/probes", 200, "/apis/|"},
		{"GET", "/v1/objects/Pod", 200, "GET /v1/objects/{kind}|Pod"},
		{"GET", "/apis//bench.example.dev/v1", 0, ""}, // as the mux answers
	} {
		mux := httptest.NewRecorder()
		s.mux.ServeHTTP(mux, httptest.NewRequest(tc.method, tc.path, nil))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != mux.Code || w.Body.String() != mux.Body.String() || w.Header().Get("Location") != mux.Header().Get("Location") {
			t.Fatalf("%s %s: %d %q, the mux %d %q", tc.method, tc.path, w.Code, w.Body.String(), mux.Code, mux.Body.String())
		}
		if tc.code != 0 && (w.Code != tc.code || w.Body.String() != tc.body) {
			t.Fatalf("%s %s: %d %q, want %d %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
}
