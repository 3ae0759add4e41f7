//go:build wasip1

// Command labelfilter is an example scheduler plugin: it admits a pod only
// on nodes that carry every label of its nodeSelector with the same value
// (NodeSelector, written as a guest). Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o labelfilter.wasm .
package main

import "github.com/jetplane/jetplane/scheduler/guest"

type labelFilter struct{}

func (labelFilter) Filter(pod *guest.Pod, node *guest.Node) (guest.Code, string) {
	for _, l := range pod.NodeSelectorList {
		if node.Labels[l.Key] != l.Value {
			return guest.UnschedulableAndUnresolvable, "node(s) didn't match the pod's labels"
		}
	}
	return guest.Success, ""
}

func init() { guest.Register(labelFilter{}) }

func main() {}
