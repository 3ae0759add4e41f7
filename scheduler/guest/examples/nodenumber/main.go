//go:build wasip1

// Command nodenumber is an example scheduler plugin: it scores a node 100
// when the last digit of its name equals the last digit of the pod's name,
// else 0 (the scheduling framework's classic NodeNumber example).
package main

import "github.com/jetplane/jetplane/scheduler/guest"

type nodeNumber struct{}

func (nodeNumber) Score(pod *guest.Pod, node *guest.Node) (int64, guest.Code, string) {
	if NodeNumberMatch(pod.Name, node.Name) {
		return 100, guest.Success, ""
	}
	return 0, guest.Success, ""
}

// NodeNumberMatch reports whether both names end in the same digit.
func NodeNumberMatch(pod, node string) bool {
	if pod == "" || node == "" {
		return false
	}
	a, b := pod[len(pod)-1], node[len(node)-1]
	return a >= '0' && a <= '9' && a == b
}

func init() { guest.Register(nodeNumber{}) }

func main() {}
