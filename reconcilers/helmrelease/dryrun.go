package helmrelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/reconcilers"
)

// dryRunner validates a manifest as its cluster would apply it.
type dryRunner interface {
	DryRun(ctx context.Context, m map[string]any) error
}

// dryRunsAtOnce is how many objects of a revision are checked by the
// cluster at once.
const dryRunsAtOnce = 16

// dryRun has the release's cluster check every object of a new revision
// before any is written: a server-side apply with dryRun=All, as the
// Apply children will send it. Objects the cluster refuses fail the
// revision terminally, each named with its template, line, key and the
// field the apiserver names. Objects it cannot check yet (a kind whose
// CRD the chart installs, a namespace not created yet) pass: their Apply
// reports what the cluster says.
func (r *Reconciler) dryRun(ctx context.Context, cluster string, res *render.Result) error {
	if r.cfg.ClusterLookup == nil {
		return nil
	}
	p, err := r.cfg.ClusterLookup(cluster)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	dr, ok := p.(dryRunner)
	if !ok {
		return nil
	}
	// The objects are checked dryRunsAtOnce at a time: one by one, a
	// 100-object release waits on 100 round trips before its first write.
	refusals := make([]string, len(res.Objects))
	errs := make([]error, len(res.Objects))
	sem := make(chan struct{}, dryRunsAtOnce)
	var wg sync.WaitGroup
	for i, o := range res.Objects {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := dr.DryRun(ctx, cleanManifest(o.Manifest))
			switch {
			case err == nil, meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
			case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
				refusals[i] = fmt.Sprintf("%s:%d: %s: %s", o.Template, o.Line, o.Key(), causes(err))
			default:
				errs[i] = fmt.Errorf("cluster %s: dry run of %s: %w", cluster, o.Key(), err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var refused []string
	for _, r := range refusals {
		if r != "" {
			refused = append(refused, r)
		}
	}
	if len(refused) > 0 {
		return reconcilers.Terminal(fmt.Errorf("cluster %s refuses the revision (server-side dry run): %s", cluster, strings.Join(refused, "; ")))
	}
	return nil
}

// causes is the apiserver's reasons, each with the field it names.
func causes(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil || len(se.Status().Details.Causes) == 0 {
		return err.Error()
	}
	var out []string
	for _, c := range se.Status().Details.Causes {
		if c.Field != "" {
			out = append(out, c.Field+": "+c.Message)
		} else {
			out = append(out, c.Message)
		}
	}
	return strings.Join(out, "; ")
}

// DryRun implements dryRunner: a server-side apply of m with
// dryRun=All, by the field manager the Apply children use.
func (c clusterLookup) DryRun(ctx context.Context, m map[string]any) error {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	client, namespaced, err := c.GetClientFor(apiVersion, kind)
	if err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "jetplane", Force: &force}
	if namespaced {
		_, err = client.Namespace(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	} else {
		_, err = client.Patch(ctx, name, types.ApplyPatchType, data, opts)
	}
	return err
}
