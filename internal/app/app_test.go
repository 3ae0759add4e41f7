package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

// startApp runs a whole jetplane in-process on a temporary store and
// returns it with a client, once it is ready.
func startApp(tb testing.TB, cfg app.Config) (*app.App, *api.Client) {
	tb.Helper()
	a := runApp(tb, cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("app not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, &api.Client{BaseURL: a.URL()}
}
