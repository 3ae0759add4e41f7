package app_test

import (
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
)

// startApp runs a whole jetplane in-process on a temporary store and
// returns it with a client, once it is ready.
func startApp(tb testing.TB, cfg app.Config) (*app.App, *api.Client) {
	tb.Helper()
	a, _ := apptest.Start(tb, cfg, 30*time.Second)
	return a, &api.Client{BaseURL: a.URL()}
}
