package api

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jetplane/jetplane/schemas"
)

// The JSON shapes of the API. Objects and events are protojson of the
// schemas, embedded as raw JSON.

// ApplyResult is one object's result of an apply.
type ApplyResult struct {
	Key    Key             `json:"key"`
	Action string          `json:"action"`
	Object json.RawMessage `json:"object,omitempty"`
	// Previous is the object before the change; dry runs only.
	Previous json.RawMessage `json:"previous,omitempty"`
	// ResourceVersion is the object's version after the write, in the
	// brief answer (Prefer: return=minimal) that leaves Object out.
	ResourceVersion uint64 `json:"resourceVersion,omitempty,string"`
}

// Key names an object.
type Key struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ApplyResponse answers POST /v1/apply.
type ApplyResponse struct {
	Results []ApplyResult `json:"results"`
	// Warnings are what the objects ask for that jetplane accepts but
	// cannot give (see Warnings); also sent as Warning headers.
	Warnings []string `json:"warnings,omitempty"`
}

// ListResponse answers GET /v1/objects and GET /v1/state.
type ListResponse struct {
	// ResourceVersion is the log sequence the list is consistent with; a
	// watch from it misses nothing.
	ResourceVersion uint64            `json:"resourceVersion,string"`
	Items           []json.RawMessage `json:"items"`
	// Continue, when set, fetches the next page (?continue=).
	Continue string `json:"continue,omitempty"`
}

// HistoryResponse answers GET /v1/history.
type HistoryResponse struct {
	Events []json.RawMessage `json:"events"`
	// Continue, when set, fetches the next page (?continue=).
	Continue string `json:"continue,omitempty"`
}

// WatchEvent is the data of one server-sent event of GET /v1/watch.
type WatchEvent struct {
	Type            string          `json:"type"`
	ResourceVersion uint64          `json:"resourceVersion,string"`
	Key             Key             `json:"key"`
	Object          json.RawMessage `json:"object"`
}

// ClustersResponse answers GET /v1/clusters.
type ClustersResponse struct {
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one Kubernetes cluster the bridge watches.
type Cluster struct {
	Name string `json:"name"`
	// State is connecting, synced or error.
	State string `json:"state"`
	// Synced is whether the cluster synced since the process started; it
	// stays true through later errors.
	Synced    bool              `json:"synced"`
	Resources []ClusterResource `json:"resources"`
	// Objects is how many objects the bridge's caches hold.
	Objects int `json:"objects"`
	// LastEventTime is when an event of the cluster was last appended.
	LastEventTime *time.Time `json:"lastEventTime,omitempty"`
	// LastError is the latest failure, kept after recovery as a hint.
	LastError     string     `json:"lastError,omitempty"`
	LastErrorTime *time.Time `json:"lastErrorTime,omitempty"`
	// Appended counts events stored, Duplicates events another bridge
	// stored first, Dropped objects too large to record.
	Appended   uint64 `json:"appended"`
	Duplicates uint64 `json:"duplicates"`
	Dropped    uint64 `json:"dropped"`
	// Relists counts full lists after the first; Gone the 410 answers
	// that caused some of them.
	Relists uint64 `json:"relists"`
	Gone    uint64 `json:"gone"`
	// Queue is how many events wait to be appended.
	Queue int `json:"queue"`
}

// ClusterResource is one watched resource of a cluster.
type ClusterResource struct {
	Resource string `json:"resource"`
	Kind     string `json:"kind,omitempty"`
	Synced   bool   `json:"synced"`
	Objects  int    `json:"objects"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error   string        `json:"error"`
	Details []ErrorDetail `json:"details,omitempty"`
}

// ErrorDetail is one problem of a rejected manifest.
type ErrorDetail struct {
	Source   string `json:"source,omitempty"`
	Document int    `json:"document,omitempty"`
	Field    string `json:"field,omitempty"`
	Reason   string `json:"reason"`
}

var marshal = protojson.MarshalOptions{}

func rawObject(o *schemas.Object) json.RawMessage {
	if o == nil {
		return nil
	}
	b, err := marshal.Marshal(o)
	if err != nil {
		// protojson fails only on invalid UTF-8 or Any resolution, which
		// the gate's validation rules out.
		panic(err)
	}
	return b
}

func rawEvent(ev *schemas.Event) json.RawMessage {
	b, err := marshal.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeObject parses an object from the API's JSON.
func DecodeObject(raw json.RawMessage) (*schemas.Object, error) {
	o := new(schemas.Object)
	return o, protojson.Unmarshal(raw, o)
}

// DecodeEvent parses an event from the API's JSON.
func DecodeEvent(raw json.RawMessage) (*schemas.Event, error) {
	ev := new(schemas.Event)
	return ev, protojson.Unmarshal(raw, ev)
}

// KindsResponse answers GET /v1/kinds.
type KindsResponse struct {
	Kinds []KindInfo `json:"kinds"`
}

// KindInfo is one kind, as `jetplane api-resources` lists it.
type KindInfo struct {
	Kind  string `json:"kind"`
	Group string `json:"group,omitempty"`
	// Name is the kind as keys hold it: Kind.group, or Kind.
	Name       string   `json:"name"`
	Plural     string   `json:"plural"`
	ShortNames []string `json:"shortNames,omitempty"`
	Namespaced bool     `json:"namespaced"`
	// Objects is how many objects of the kind exist now.
	Objects int `json:"objects"`
	// Seen is whether the log has events of the kind.
	Seen bool `json:"seen"`
	// Reconciler names what reconciles the kind; empty: stored only.
	Reconciler string `json:"reconciler,omitempty"`
	// Columns are the printer columns of a kind defined by a
	// CustomResourceDefinition, at its storage version.
	Columns []PrinterColumn `json:"columns,omitempty"`
}

// PrinterColumn is one of a defined kind's additionalPrinterColumns.
type PrinterColumn struct {
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"`
	JSONPath string `json:"jsonPath"`
	Priority int32  `json:"priority,omitempty"`
}

// Version answers GET /v1/version.
type Version struct {
	Version string `json:"version"`
	// Partitions, Replicas and Durability describe the log.
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replicas"`
	Durability string `json:"durability"`
	// DuplicateWindow is how long idempotency keys are remembered.
	DuplicateWindow string `json:"duplicateWindow,omitempty"`
}

// DescribeResponse answers GET /v1/describe.
type DescribeResponse struct {
	Object json.RawMessage `json:"object"`
	// Reconciler names what reconciles the object; empty: stored only.
	Reconciler   string       `json:"reconciler,omitempty"`
	Dependencies []Dependency `json:"dependencies"`
	Dependents   []Key        `json:"dependents"`
	// Events are the object's last events, oldest first.
	Events []json.RawMessage `json:"events"`
}

// Dependency is one dependsOn entry and its state.
type Dependency struct {
	Key Key `json:"key"`
	// Ready is the dependency's Ready condition (True, False, Unknown), or
	// "missing" when it does not exist.
	Ready string `json:"ready"`
	Phase string `json:"phase,omitempty"`
}

// PartitionsResponse answers GET /v1/partitions.
type PartitionsResponse struct {
	// Partitions is how many partitions the key space has.
	Partitions int                  `json:"partitions"`
	Instances  []InstancePartitions `json:"instances"`
	// Unheld are partitions no instance holds right now.
	Unheld []int `json:"unheld"`
}

// InstancePartitions is one instance and the partitions it holds.
type InstancePartitions struct {
	Instance   string `json:"instance"`
	Partitions []int  `json:"partitions"`
}
