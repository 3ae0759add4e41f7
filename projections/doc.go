// Package projections folds the event log into current state.
//
// Fold is the pure core: the next state of one key given its current state
// and an event. Store applies folds to an in-memory set of objects indexed
// like an informer cache (key, kind, namespace, labels, group, reverse
// dependsOn), serves get, list with label selectors and watch from a
// resourceVersion, and takes and restores snapshots. Projector is the runner
// around them: it restores the latest snapshot, follows the log from there
// and snapshots periodically. StateAt rebuilds the state as of any past
// sequence.
//
// Projections never call reconcilers and never write to the log.
package projections
