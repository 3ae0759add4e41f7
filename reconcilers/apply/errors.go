package apply

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetplane/jetplane/reconcilers"
)

// ErrUnknownCluster is an Apply whose spec.cluster names no configured
// cluster. It is terminal: the Apply runs again once it changes (or once
// the instance restarts with the cluster configured).
var ErrUnknownCluster = errors.New("unknown cluster")

// classify wraps an error of the apiserver with what was being done and
// decides whether retrying can help. The apiserver's rejections of the
// manifest itself (invalid, malformed, not fitting the schema, too large, a
// kind the cluster does not serve) are terminal, their message kept, so
// status shows the reason and the key does not retry in a loop; anything
// else (the network, an unreachable or overloaded apiserver, a conflict, a
// missing namespace, missing permissions) is retried with backoff.
func classify(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if rejected(err) {
		return reconcilers.Terminal(err)
	}
	return err
}

// typedPatchFailure begins the message of an apply whose body does not fit
// the resource's schema (a string where a number goes, an undeclared field,
// duplicate list keys). kube-apiserver 1.36 reports it as an internal error
// (500), not as a rejection of the request (kubernetes/kubernetes#139253),
// so it is recognised by its message; should a later apiserver answer 400,
// IsBadRequest catches it.
const typedPatchFailure = "failed to create typed patch object"

func rejected(err error) bool {
	if apierrors.IsInternalError(err) && strings.Contains(err.Error(), typedPatchFailure) {
		return true
	}
	return apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) ||
		apierrors.IsNotAcceptable(err) ||
		apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsMethodNotSupported(err) ||
		meta.IsNoMatchError(err)
}
