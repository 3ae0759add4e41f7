package gate

import (
	"strconv"
	"strings"
	"sync"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
)

// KindStore is the part of the projection KindCheck reads.
type KindStore interface {
	Keys(q projections.Query) ([]projections.Key, uint64)
	GetRecord(k projections.Key) *schemas.ObjectRecord
	List(q projections.Query) ([]*schemas.Object, uint64)
	Get(k projections.Key) *schemas.Object
}

var _ KindStore = (*projections.Store)(nil)

// KindCheck admits the objects of a request against the kinds in effect:
// built-in ones, those defined by the CustomResourceDefinitions the
// projection holds (every instance folds the same log, so every instance
// agrees), and, grandfathered, undefined kinds that already have objects.
// The compiled catalog is rebuilt only when a CRD changes. Safe for
// concurrent use; see package crd for what is checked.
type KindCheck struct {
	store    KindStore
	compiled func(kind string) bool

	mu  sync.Mutex
	sig string
	cat *crd.Catalog
}

// NewKindCheck returns a KindCheck over store; its Admit is the gate's
// Config.Admit. compiled, when not nil, reports the kinds a reconciler
// compiled into this server handles: they are defined by that code.
func NewKindCheck(store KindStore, compiled func(kind string) bool) *KindCheck {
	return &KindCheck{store: store, compiled: compiled}
}

// Catalog is the kinds defined now.
func (k *KindCheck) Catalog() *crd.Catalog {
	keys, _ := k.store.Keys(projections.Query{Kind: crd.Kind})
	var sig strings.Builder
	for _, key := range keys {
		if r := k.store.GetRecord(key); r != nil && defines(key, r.GetStatus()) {
			sig.WriteString(key.Name)
			sig.WriteByte('@')
			sig.WriteString(strconv.FormatUint(r.GetMetadata().GetResourceVersion(), 10))
			sig.WriteByte(' ')
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cat != nil && k.sig == sig.String() {
		return k.cat
	}
	objs, _ := k.store.List(projections.Query{Kind: crd.Kind})
	var crds []*schemas.Object
	for _, o := range objs {
		if defines(projections.ObjectKey(o), o.GetStatus()) {
			crds = append(crds, o)
		}
	}
	k.cat, k.sig = crd.NewCatalog(crds), sig.String()
	return k.cat
}

// defines reports whether a stored CRD is in effect: applied to jetplane
// (an observed one has its cluster in its namespace) and not being deleted.
func defines(k projections.Key, st *schemas.Status) bool {
	return k.Kind == crd.Kind && k.Namespace == "" && st.GetGoal() != projections.GoalDeleted
}

// Admit checks objs (see crd.Catalog.Admit) and returns them as they are
// to be stored.
func (k *KindCheck) Admit(objs []*schemas.Object) ([]*schemas.Object, error) {
	inUse := map[string]bool{} // asked once per kind per request
	return k.Catalog().Admit(objs, crd.Admission{
		Current: k.store.Get,
		InUse: func(kind string) bool {
			v, ok := inUse[kind]
			if !ok {
				v = k.inUse(kind)
				inUse[kind] = v
			}
			return v
		},
		Compiled: k.compiled,
	})
}

// inUse reports whether objects of kind were applied to jetplane and
// still exist. Objects observed in a Kubernetes cluster (their namespace
// holds the cluster's name and a slash) do not count: they say what a
// cluster has, not what jetplane accepted.
func (k *KindCheck) inUse(kind string) bool {
	keys, _ := k.store.Keys(projections.Query{Kind: kind})
	for _, key := range keys {
		if key.Kind == kind && !strings.Contains(key.Namespace, "/") {
			return true
		}
	}
	return false
}
