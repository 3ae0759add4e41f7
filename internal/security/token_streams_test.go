package security

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
)

// A stream opened with a controller token ends when the token does: a
// watch of the Kubernetes API and a watch of jetplane's own API, both
// opened before the credential is revoked, end after it (and opening
// them again is refused), and a Kubernetes watch opened with a token
// about to expire ends once it has.
func TestStreamsEndWithTheirControllerToken(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	ctx := context.Background()
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	if _, err := admin.Apply(ctx, "crds.yaml", []byte(kindWithStatus("Widget", "widgets")), ""); err != nil {
		t.Fatal(err)
	}
	creds, err := a.Creds().CreateWithKinds(auth.RoleController, "widgets", []string{widgetKind})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Apply(ctx, "objs.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nspec: {size: 1}\n"), ""); err != nil {
		t.Fatal(err)
	}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	kubeWatch := func(token string) <-chan struct{} {
		t.Helper()
		dc, err := dynamic.NewForConfig(&rest.Config{Host: a.URL(), BearerToken: token})
		if err != nil {
			t.Fatal(err)
		}
		w, err := dc.Resource(widgets).Namespace("shop").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch with a live token: %v", err)
		}
		t.Cleanup(w.Stop)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for range w.ResultChan() {
			}
		}()
		return ended
	}
	// waitEnd fails unless ended closes within a generous deadline (the
	// token is checked again every second).
	waitEnd := func(what string, ended <-chan struct{}) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still open 30s after its token stopped holding", what)
		}
	}

	token, _, err := auth.SignToken(creds, 10*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubeWatch(token)
	// jetplane's watch: the first event shows the stream is open; the
	// client resumes after a stream ends and stops at a refusal.
	own := &api.Client{BaseURL: a.URL(), Token: token}
	opened, ownErr := make(chan struct{}), make(chan error, 1)
	go func() {
		first := true
		ownErr <- own.Watch(ctx, api.Query{Kind: widgetKind}, 0, func(api.WatchEvent) error {
			if first {
				first = false
				close(opened)
			}
			return nil
		})
	}()
	select {
	case <-opened:
	case err := <-ownErr:
		t.Fatalf("jetplane watch with a live token: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("jetplane watch delivered nothing")
	}
	select {
	case <-kube:
		t.Fatal("the Kubernetes watch ended before its token stopped holding")
	default:
	}

	// A credentials file that cannot be read for a moment is no refusal:
	// a request is answered 503, and open streams stay open through it.
	users, err := os.ReadFile(a.Creds().UsersPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.Creds().UsersPath(), users[:len(users)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = own.Get(ctx, api.Key{Kind: widgetKind, Namespace: "shop", Name: "w1"})
	if apiErr := (*api.APIError)(nil); !errors.As(err, &apiErr) || apiErr.Code != http.StatusServiceUnavailable {
		t.Fatalf("a request while the credentials cannot be read: %v, want a 503", err)
	}
	time.Sleep(2500 * time.Millisecond) // two checks of the open streams
	if err := os.WriteFile(a.Creds().UsersPath(), users, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kube:
		t.Fatal("a Kubernetes watch ended while the credentials could not be read for a moment")
	case err := <-ownErr:
		t.Fatalf("a jetplane watch ended while the credentials could not be read for a moment: %v", err)
	default:
	}
	if _, err := own.Get(ctx, api.Key{Kind: widgetKind, Namespace: "shop", Name: "w1"}); err != nil {
		t.Fatalf("a request once the credentials read again: %v", err)
	}

	if err := a.Creds().Revoke("widgets"); err != nil {
		t.Fatal(err)
	}
	waitEnd("a Kubernetes watch of a revoked credential", kube)
	select {
	case err := <-ownErr:
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized {
			t.Fatalf("jetplane watch after revocation ended with %v, want a 401 on resuming", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a jetplane watch of a revoked credential still open 30s later")
	}

	// Expiry: a second credential, a token of a few seconds.
	creds2, err := a.Creds().CreateWithKinds(auth.RoleController, "widgets2", []string{"Sprocket.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	short, exp, err := auth.SignToken(creds2, 3*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ended := kubeWatch(short)
	waitEnd("a Kubernetes watch of an expired token", ended)
	if time.Now().Before(exp) {
		t.Fatalf("the watch ended before its token expired at %s", exp)
	}
}
