package podspec

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// Work is what an instance hands a node agent about one pod bound to it,
// in the JP_NODEWORK bucket: everything the agent needs to run the pod,
// resolved (env values from ConfigMaps included, those from Secrets
// sealed for the node in Sealed), so that the agent never reads the log.
type Work struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the pod's generation the spec is of; the agent reports
	// it as observedGeneration.
	Generation int64          `json:"generation"`
	Spec       corev1.PodSpec `json:"spec"`
	// Deleted asks the agent to stop the pod and report Terminated.
	Deleted bool `json:"deleted,omitempty"`
	// Finished says the pod ended for good (its agent reported it
	// Succeeded or Failed): an agent that restarts does not run it again.
	Finished bool `json:"finished,omitempty"`
	// Sealed holds the env values taken from Secrets, sealed for the
	// node (Seal, Open); their entries in Spec have no value.
	Sealed []byte `json:"sealed,omitempty"`
}

// Encode is the bucket's value.
func (w *Work) Encode() ([]byte, error) { return json.Marshal(w) }

// DecodeWork reads a bucket value.
func DecodeWork(data []byte) (*Work, error) {
	w := new(Work)
	if err := json.Unmarshal(data, w); err != nil {
		return nil, err
	}
	return w, nil
}

// Report is what an agent sends about a node (in JP_NODES, every
// heartbeat): who it is and what it offers.
type Report struct {
	Node        string              `json:"node"`
	Labels      map[string]string   `json:"labels,omitempty"`
	Taints      []corev1.Taint      `json:"taints,omitempty"`
	Capacity    corev1.ResourceList `json:"capacity"`
	Allocatable corev1.ResourceList `json:"allocatable"`
	// Pods running on the node now.
	Pods int `json:"pods"`
	// Agent is the agent's version string.
	Agent string `json:"agent,omitempty"`
	// SealKey is the node's X25519 public key (32 bytes) that pods'
	// Secret values are sealed for (Work.Seal).
	SealKey []byte `json:"sealKey,omitempty"`
}
