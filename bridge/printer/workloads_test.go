package printer

import (
	"bytes"
	"strings"
	"testing"
)

// Pods and workloads print with kubectl's columns; a pending pod is not
// ready, a pod of a lost node is Unknown.
func TestKindTables(t *testing.T) {
	running := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop"},"spec":{"nodeName":"n1","containers":[{"name":"web","image":"m"}]},
		"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","reason":"Running"}],"details":{"phase":"Running","containerStatuses":[{"name":"web","ready":true,"restartCount":2,"state":{"running":{}}}]}}}`
	pending := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-2","namespace":"shop"},"spec":{"containers":[{"name":"web","image":"m"}]},
		"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"True","reason":"Reconciled"}]}}`
	lost := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-3","namespace":"shop"},"spec":{"nodeName":"n2","containers":[{"name":"web","image":"m"}]},
		"status":{"phase":"Unknown","conditions":[{"type":"Ready","status":"Unknown","reason":"NodeLost"}],"details":{"phase":"Unknown","reason":"NodeLost","containerStatuses":[{"name":"web","ready":true}]}}}`
	var buf bytes.Buffer
	if err := Print(&buf, items(t, running, pending, lost), false, Options{Format: "wide"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	for i, want := range [][]string{
		{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"},
		{"shop", "web-1", "1/1", "Running", "2", "-", "n1"},
		{"shop", "web-2", "0/1", "Pending", "0", "-", "<none>"},
		{"shop", "web-3", "0/1", "Unknown", "0", "-", "n2"},
	} {
		if f := strings.Fields(lines[i]); len(f) < len(want) || strings.Join(f[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("line %d: %q, want %q first", i, lines[i], want)
		}
	}
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":4},
		"status":{"details":{"readyReplicas":3,"updatedReplicas":4,"availableReplicas":3}}}`
	buf.Reset()
	if err := Print(&buf, items(t, deploy), false, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(strings.Split(buf.String(), "\n")[1]); strings.Join(got, " ") != "shop web 3/4 4 3 -" {
		t.Errorf("deployment row %q", got)
	}
}

// CronJobs print with kubectl's columns.
func TestCronJobTable(t *testing.T) {
	cj := `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"nightly","namespace":"shop"},"spec":{"schedule":"0 3 * * *","suspend":true,"jobTemplate":{}},
		"status":{"details":{"active":[{"name":"nightly-1"}]}}}`
	var buf bytes.Buffer
	if err := Print(&buf, items(t, cj), false, Options{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAMESPACE NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE" {
		t.Errorf("header %q", got)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "shop nightly 0 3 * * * <none> true 1 <none> -" {
		t.Errorf("row %q", got)
	}
}
