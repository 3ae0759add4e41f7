package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// storeServer serves the Kubernetes API's reads from st alone, for an
// admin.
func storeServer(t *testing.T, st *projections.Store) *httptest.Server {
	t.Helper()
	s := &Server{cfg: Config{Store: st, Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(*http.Request) (Caller, error) {
			return Caller{Principal: gate.Principal{Name: "test", Role: gate.RoleAdmin}}, nil
		}}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func configMapApplied(seq uint64, name, value string) *schemas.EventRecord {
	return &schemas.EventRecord{Sequence: seq, Type: schemas.EventType_EVENT_TYPE_APPLIED,
		Key: &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "ns", Name: name},
		Object: &schemas.ObjectRecord{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &schemas.ObjectMeta{
			Annotations: map[string]string{"value": value}}}}
}

// TestWatchFromASequenceNotFoldedYet is a client that switches to an
// instance whose projection is behind the resourceVersion it saw: the
// watch waits until the instance has folded that far, and then sends only
// the changes after it, never again the ones the client has.
func TestWatchFromASequenceNotFoldedYet(t *testing.T) {
	st := projections.NewStore(projections.StoreOptions{})
	for seq := uint64(1); seq <= 5; seq++ {
		st.Apply(configMapApplied(seq, fmt.Sprint("cm-", seq), "1"))
	}
	waits := make(chan uint64, 1)
	waiting = func(rv uint64) { waits <- rv }
	t.Cleanup(func() { waiting = nil })
	srv := storeServer(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The client saw sequence 8 on another instance.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=8", nil)
	got := make(chan string, 16)
	go func() {
		defer close(got)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			got <- fmt.Sprintf("status %d: %s", resp.StatusCode, b)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name            string `json:"name"`
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				got <- "undecodable: " + sc.Text()
				return
			}
			got <- ev.Type + " " + ev.Object.Metadata.Name + " " + ev.Object.Metadata.ResourceVersion
		}
	}()
	// This instance folds 6, 7 and 8 (which the client has), then 9.
	select {
	case <-waits:
	case ev := <-got:
		t.Fatalf("the watch did not wait for sequence 8: %s", ev)
	case <-ctx.Done():
		t.Fatal("the watch did not wait for sequence 8")
	}
	for seq := uint64(6); seq <= 9; seq++ {
		st.Apply(configMapApplied(seq, fmt.Sprint("cm-", seq), "1"))
	}
	select {
	case ev := <-got:
		if ev != "ADDED cm-9 9" {
			t.Fatalf("first event = %q, want ADDED cm-9 9 (changes up to 8 are the client's already)", ev)
		}
	case <-ctx.Done():
		t.Fatal("no event within 20s")
	}
}

// TestWatchFromASequenceNeverFolded is answered as kube-apiserver answers
// a resourceVersion its storage has not reached: 504 with the cause
// ResourceVersionTooLarge and Retry-After, which client-go retries.
func TestWatchFromASequenceNeverFolded(t *testing.T) {
	old := FreshWait
	FreshWait = 100 * time.Millisecond
	t.Cleanup(func() { FreshWait = old })
	st := projections.NewStore(projections.StoreOptions{})
	st.Apply(configMapApplied(1, "a", "1"))
	srv := storeServer(t, st)
	for _, path := range []string{
		"/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=50",
		"/api/v1/namespaces/ns/configmaps?resourceVersion=50",
	} {
		// A watch that is (wrongly) accepted would stream forever.
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Reason  string `json:"reason"`
			Details struct {
				Causes []struct {
					Type string `json:"reason"`
				} `json:"causes"`
			} `json:"details"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retry-After") == "" ||
			st.Reason != "Timeout" || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "ResourceVersionTooLarge" {
			t.Errorf("%s: %d Retry-After %q %+v; want 504, Retry-After, reason Timeout, cause ResourceVersionTooLarge",
				path, resp.StatusCode, resp.Header.Get("Retry-After"), st)
		}
	}
}
