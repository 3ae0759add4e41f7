package pod_test

import (
	"fmt"
	"strings"
	"testing"
)

// Pods started together: however their agent's reports were grouped
// (decision 0089), each pod's history names every state it entered,
// once and in order.
func TestEveryStateRecordedOnceWhenReportsCoalesce(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	want := "Registered(Registered) ImagePull(Pulling) Starting(ContainerCreating) Running Completed(Completed)"
	// The first pod pulls and compiles the module: its start waits.
	c.apply(podYAML("first", "n1", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "first"), "Completed")
	if got := strings.Join(c.phases(podKey("default", "first")), " "); got != want {
		t.Errorf("first: history %s\nwant %s", got, want)
	}
	const n = 40
	var batch strings.Builder
	for i := range n {
		batch.WriteString("---\n" + podYAML(fmt.Sprintf("c%d", i), "n1", "Never", "workload:v1", "hello"))
	}
	c.apply(batch.String())
	events := 0
	for i := range n {
		k := podKey("default", fmt.Sprintf("c%d", i))
		c.waitPhase(k, "Completed")
		if got := strings.Join(c.phases(k), " "); got != want {
			t.Errorf("%s: history %s\nwant %s", k.Name, got, want)
		}
		events += len(c.statusEvents(k))
	}
	t.Logf("%d pods' %d states recorded in %d events", n, 5*n, events)
}
