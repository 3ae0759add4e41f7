package security

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
)

func principals() []api.Principal {
	return []api.Principal{
		{Token: "admin-token", Name: "root", Role: api.RoleAdmin},
		{Token: "writer-token", Name: "ci", Role: api.RoleWriter},
		{Token: "shop-writer-token", Name: "shopci", Role: api.RoleWriter, Namespaces: []string{"shop"}},
		{Token: "reader-token", Name: "audit", Role: api.RoleReader},
		{Token: "shop-reader-token", Name: "shopaudit", Role: api.RoleReader, Namespaces: []string{"shop"}},
	}
}

// call makes one API request with token ("" for none) and returns its
// status code.
func call(t *testing.T, a *app.App, token, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, a.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

const otherCM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: other}\ndata: {a: b}\n"
const shopCM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y, namespace: shop}\ndata: {a: b}\n"
const clusterNS = "apiVersion: v1\nkind: Namespace\nmetadata: {name: evil}\n"

// Every API call that lacks the right is refused, 401 without a valid
// token and 403 without the role or namespace, and writes nothing.
func TestAPIRefusesWithoutTheRight(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	seed(t, &api.Client{BaseURL: a.URL(), Token: "admin-token"})
	before := fingerprintOf(t, a)
	web := "?kind=ConfigMap&namespace=shop&name=web"
	tests := []struct {
		name, token, method, path, body string
		want                            int
	}{
		{"no token: apply", "", "POST", "/v1/apply", otherCM, 401},
		{"no token: get", "", "GET", "/v1/object" + web, "", 401},
		{"no token: history", "", "GET", "/v1/history" + web, "", 401},
		{"bad token: apply", "admin-tokeN", "POST", "/v1/apply", otherCM, 401},
		{"bad token: list", "x", "GET", "/v1/objects", "", 401},
		{"prefix of a token", "admin", "GET", "/v1/objects", "", 401},
		{"reader: apply", "reader-token", "POST", "/v1/apply", otherCM, 403},
		{"reader: delete", "reader-token", "DELETE", "/v1/object" + web, "", 403},
		{"scoped writer: apply elsewhere", "shop-writer-token", "POST", "/v1/apply", otherCM, 403},
		{"scoped writer: apply a cluster-scoped object", "shop-writer-token", "POST", "/v1/apply", clusterNS, 403},
		{"scoped writer: apply in and out of scope", "shop-writer-token", "POST", "/v1/apply", shopCM + "---\n" + otherCM, 403},
		{"scoped writer: delete elsewhere", "shop-writer-token", "DELETE", "/v1/object?kind=Namespace&name=shop", "", 403},
		{"scoped reader: list everything", "shop-reader-token", "GET", "/v1/objects", "", 403},
		{"scoped reader: get elsewhere", "shop-reader-token", "GET", "/v1/object?kind=ConfigMap&namespace=other&name=x", "", 403},
		{"scoped reader: watch everything", "shop-reader-token", "GET", "/v1/watch", "", 403},
		{"scoped reader: state of everything", "shop-reader-token", "GET", "/v1/state?at=1", "", 403},
		{"reader: backup of the whole log", "reader-token", "GET", "/v1/backup", "", 403},
		{"writer: backup of the whole log", "writer-token", "GET", "/v1/backup", "", 403},
		{"reader: push a chart", "reader-token", "PUT", "/v1/charts/web/1.0.0", "x", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := call(t, a, tt.token, tt.method, tt.path, tt.body); got != tt.want {
				t.Fatalf("status %d, want %d", got, tt.want)
			}
		})
	}
	unchanged(t, a, before)

	// What each may do, it does; events record who.
	allowed := []struct {
		name, token, method, path, body string
	}{
		{"reader: get", "reader-token", "GET", "/v1/object" + web, ""},
		{"reader: list", "reader-token", "GET", "/v1/objects", ""},
		{"reader: history", "reader-token", "GET", "/v1/history" + web, ""},
		{"scoped reader: list its namespace", "shop-reader-token", "GET", "/v1/objects?namespace=shop", ""},
		{"scoped writer: apply in scope", "shop-writer-token", "POST", "/v1/apply", shopCM},
		{"writer: apply", "writer-token", "POST", "/v1/apply", otherCM},
	}
	for _, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			if got := call(t, a, tt.token, tt.method, tt.path, tt.body); got != http.StatusOK {
				t.Fatalf("status %d, want 200", got)
			}
		})
	}
	h, err := (&api.Client{BaseURL: a.URL(), Token: "reader-token"}).History(context.Background(), api.Key{Kind: "ConfigMap", Namespace: "shop", Name: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || !strings.Contains(string(h.Events[0]), `"user/shopci"`) {
		t.Fatalf("history of shop/y = %s, want one event by user/shopci", h.Events)
	}
}

// The client reports a refusal as an error that names the status.
func TestAPIClientSeesRefusals(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	_, err := (&api.Client{BaseURL: a.URL(), Token: "reader-token"}).Apply(context.Background(), "x.yaml", []byte(otherCM), "")
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden {
		t.Fatalf("apply as reader: %v, want a 403 APIError", err)
	}
}
