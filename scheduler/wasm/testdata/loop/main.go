//go:build wasip1

// Command loop is a faulty guest: it never returns when the pod is named
// bad*.
package main

import (
	"strings"

	"github.com/jetplane/jetplane/scheduler/guest"
)

type p struct{}

var sink int

func (p) Filter(pod *guest.Pod, _ *guest.Node) (guest.Code, string) {
	for strings.HasPrefix(pod.Name, "bad") {
		sink++
	}
	return guest.Success, ""
}

func init() { guest.Register(p{}) }

func main() {}
