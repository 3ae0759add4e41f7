package api

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A stream held open with a controller token outlives a moment in which
// the credentials cannot be read, ends once the token is refused, and
// ends too when the credentials stay unreadable past tokenUncheckedFor.
func TestStreamOutlivesUncheckedToken(t *testing.T) {
	recheck, uncheckedFor := tokenRecheck, tokenUncheckedFor
	tokenRecheck, tokenUncheckedFor = 5*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { tokenRecheck, tokenUncheckedFor = recheck, uncheckedFor })

	var (
		mu     sync.Mutex
		answer error
		checks int
	)
	set := func(err error) {
		mu.Lock()
		answer, checks = err, 0
		mu.Unlock()
	}
	// waitChecks returns once the token was checked n more times.
	waitChecks := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			c := checks
			mu.Unlock()
			if c >= n {
				return
			}
		}
		t.Fatalf("the token was not checked %d times", n)
	}
	unreadable := fmt.Errorf("%w: credentials: unexpected end of JSON input", ErrTokenUnchecked)
	s := &Server{cfg: Config{ControllerToken: func(string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		checks++
		return "widgets", answer
	}}}
	open := func() (done <-chan struct{}, cause func() error, stop func()) {
		r := httptest.NewRequest("GET", "/v1/watch", nil)
		r.Header.Set("Authorization", "Bearer jpc.widgets.1.sig")
		r, stop = s.whileTokenHolds(r, &Principal{Name: "widgets", Role: RoleController})
		return r.Context().Done(), func() error { return context.Cause(r.Context()) }, stop
	}

	// Unreadable for a few checks, then readable again: the stream goes on.
	done, _, stop := open()
	set(unreadable)
	waitChecks(3)
	set(nil)
	waitChecks(3)
	select {
	case <-done:
		t.Fatal("a stream ended while its credentials could not be read for a moment")
	default:
	}
	// Refused: it ends with the refusal.
	refused := errors.New("controller token refused: expired")
	set(refused)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream outlived its token's refusal")
	}
	stop()

	// Unreadable for longer than tokenUncheckedFor: it ends as well.
	set(unreadable)
	done, cause, stop := open()
	defer stop()
	select {
	case <-done:
		if !errors.Is(cause(), ErrTokenUnchecked) {
			t.Fatalf("ended by %v, want the unchecked token", cause())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream outlived credentials unreadable for longer than tokenUncheckedFor")
	}
}
