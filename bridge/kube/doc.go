// Package kube brings Kubernetes clusters into the log: it watches the
// configured resources of each cluster with client-go dynamic informers and
// appends every change as an event, as decision 0009 lays down.
//
//   - An added or updated object is an Observed event by bridge/<cluster>
//     under key (Kind[.group], <cluster>/<namespace>, name), holding the
//     object without managedFields, its labels, and the annotations
//     jetplane.io/cluster, jetplane.io/uid and jetplane.io/resource-version.
//   - A deleted object, whether the watch saw the delete, a relist found it
//     gone, or it was deleted while no bridge was running, is a Finalized
//     event by bridge/<cluster>.
//   - Each event's id is k8s/<cluster>/<uid>/<resourceVersion>/<Observed|Deleted>,
//     the log's dedupe id, so bridges watching one cluster store each change
//     once; the fold drops observations older than what it holds.
//
// Informer handlers only build events and queue them; one writer per
// cluster appends the queue in order, in pipelined batches, retrying what
// fails. A cluster's Status (connecting, synced, error; last error; last
// event) feeds readiness and the clusters listing.
//
// The package reads current state (to skip what the log already holds and to
// find what vanished) but never reconciles: pushing objects into clusters is
// reconcilers/apply's work. Only this package and reconcilers/apply import
// client-go.
package kube
