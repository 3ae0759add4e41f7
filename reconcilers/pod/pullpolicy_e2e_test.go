package pod_test

import (
	"strings"
	"testing"

	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
)

// imagePullPolicy is Kubernetes': a tag the node resolved before is not
// resolved again unless the container asks for Always; Never runs only
// what the node holds.
func TestImagePullPolicy(t *testing.T) {
	c := startCluster(t, nil)
	first := c.push("moving:v1", workload(t))
	imageID := func(o *schemas.Object) string {
		t.Helper()
		ps, err := pod.PodStatus(o.GetStatus())
		if err != nil || len(ps.ContainerStatuses) == 0 {
			t.Fatalf("status %v: %v", o.GetStatus(), err)
		}
		return ps.ContainerStatuses[0].ImageID
	}
	withPolicy := func(name, policy string) string {
		return podYAML(name, "n1", "Never", "moving:v1", "hello") + "    imagePullPolicy: " + policy + "\n"
	}
	c.apply(podYAML("before", "n1", "Never", "moving:v1", "hello"))
	if got := imageID(c.waitPhase(podKey("default", "before"), "Completed")); got != first.Digest {
		t.Fatalf("first pod ran %s, want %s", got, first.Digest)
	}
	// The tag moves to another module (one that traps).
	moved := c.push("moving:v1", trapModule)
	c.apply(podYAML("ifnotpresent", "n1", "Never", "moving:v1", "hello"))
	if got := imageID(c.waitPhase(podKey("default", "ifnotpresent"), "Completed")); got != first.Digest {
		t.Fatalf("IfNotPresent (the default for a tag) ran %s, want the node's %s", got, first.Digest)
	}
	c.apply(withPolicy("always", "Always"))
	if o := c.waitPhase(podKey("default", "always"), "Error"); imageID(o) != moved.Digest {
		t.Fatalf("Always ran %s, want the tag's new %s", imageID(o), moved.Digest)
	}
	// Pulled again, the tag names the new module on this node too.
	c.apply(withPolicy("after", "IfNotPresent"))
	if o := c.waitPhase(podKey("default", "after"), "Error"); imageID(o) != moved.Digest {
		t.Fatalf("IfNotPresent after an Always pull ran %s, want %s", imageID(o), moved.Digest)
	}
	c.push("elsewhere:v1", workload(t))
	c.apply(strings.Replace(withPolicy("never", "Never"), "moving:v1", "elsewhere:v1", 1))
	o := c.waitPhase(podKey("default", "never"), "ImagePullBackoff")
	if msg := o.GetStatus().GetMessage(); !strings.Contains(msg, "ErrImageNeverPull") {
		t.Fatalf("Never with the image not on the node: %q", msg)
	}
}
