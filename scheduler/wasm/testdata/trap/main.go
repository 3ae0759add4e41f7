//go:build wasip1

// Command trap is a faulty guest: it panics when the pod is named bad*.
package main

import (
	"strings"

	"github.com/jetplane/jetplane/scheduler/guest"
)

type p struct{}

func (p) Filter(pod *guest.Pod, _ *guest.Node) (guest.Code, string) {
	if strings.HasPrefix(pod.Name, "bad") {
		var m map[string]int
		m["x"] = 1 // nil map write: the guest traps
	}
	return guest.Success, ""
}

func init() { guest.Register(p{}) }

func main() {}
