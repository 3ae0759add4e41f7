//go:build wasip1

// Command hog is a faulty guest: it allocates without bound when the pod
// is named bad*.
package main

import (
	"strings"

	"github.com/jetplane/jetplane/scheduler/guest"
)

type p struct{}

var keep [][]byte

func (p) Filter(pod *guest.Pod, _ *guest.Node) (guest.Code, string) {
	for strings.HasPrefix(pod.Name, "bad") {
		keep = append(keep, make([]byte, 1<<20))
	}
	return guest.Success, ""
}

func init() { guest.Register(p{}) }

func main() {}
