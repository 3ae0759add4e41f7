package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FreshWait bounds how long a list or watch waits for this instance's
// projection to reach the resourceVersion the client names. A client that
// moves between instances brings a sequence another instance folded
// first; kube-apiserver waits the same way (3 s) for its watch cache.
var FreshWait = 3 * time.Second

// waiting, when set (by tests), is told of every request that waits.
var waiting func(rv uint64)

// waitFresh blocks until the store has folded sequence rv, so that a
// request from a client that read rv elsewhere is answered from state at
// least as new as what it saw. Serving it from older state would repeat
// changes the client has (a watch) or move it back in time (a list).
//
// After FreshWait it answers as kube-apiserver does: 504 with the cause
// ResourceVersionTooLarge and Retry-After, which client-go's REST client
// retries on its own before its caller sees an error.
func (s *Server) waitFresh(w http.ResponseWriter, r *http.Request, rv uint64) error {
	if rv <= s.cfg.Store.Seq() {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), FreshWait)
	defer cancel()
	if waiting != nil {
		waiting(rv)
	}
	err := s.cfg.Store.WaitFor(ctx, rv)
	if err == nil {
		return nil
	}
	if r.Context().Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	w.Header().Set("Retry-After", "1")
	return tooLargeResourceVersion(rv, s.cfg.Store.Seq())
}

// tooLargeResourceVersion is kube-apiserver's answer to a resourceVersion
// its storage has not reached.
func tooLargeResourceVersion(want, have uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, have), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version",
	}}
	return err
}

// minResourceVersion is the sequence a list must be at least as new as:
// its resourceVersion, unless that is empty or "0" (any state will do) or
// the list continues an earlier page.
func minResourceVersion(r *http.Request) (uint64, error) {
	qs := r.URL.Query()
	rv := qs.Get("resourceVersion")
	if rv == "" || rv == "0" || qs.Get("continue") != "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion: %q is not a log sequence", rv))
	}
	return n, nil
}
