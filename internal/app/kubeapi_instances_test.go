package app_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
)

// seenEvent is one watch event as a client keeps it.
type seenEvent struct {
	typ  watch.EventType
	name string
	rv   uint64
	val  string
}

func (e seenEvent) String() string { return fmt.Sprintf("%s %s@%d=%s", e.typ, e.name, e.rv, e.val) }

// clientset is a client-go clientset for a jetplane's Kubernetes API.
func clientset(t *testing.T, url string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// collect reads ConfigMap events from w into out until the ConfigMap
// named end is added (true) or the stream ends (false).
func collect(t *testing.T, w watch.Interface, end string, out *[]seenEvent) bool {
	t.Helper()
	for ev := range w.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			t.Errorf("watch sent %s %T: %v", ev.Type, ev.Object, ev.Object)
			continue
		}
		rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		if err != nil {
			t.Errorf("event %s %s: resourceVersion %q", ev.Type, cm.Name, cm.ResourceVersion)
		}
		*out = append(*out, seenEvent{typ: ev.Type, name: cm.Name, rv: rv, val: cm.Data["i"]})
		if cm.Name == end && ev.Type == watch.Added {
			w.Stop()
			return true
		}
	}
	return false
}

// TestWatchMovesBetweenInstances runs three jetplane instances on one
// NATS server, all serving the Kubernetes API. A client watches on the
// first while changes are written through the third; the first is
// stopped part-way and the client resumes on the second from the last
// resourceVersion it saw. Its events are then exactly those of a watch
// that never moved (on the third): none lost, none repeated, in order.
func TestWatchMovesBetweenInstances(t *testing.T) {
	const ops = 300
	srv, _ := testenv.NATS(t)
	var apps [3]*app.App
	var stops [3]func()
	for i := range apps {
		apps[i], stops[i] = stoppableApp(t, app.Config{
			NATS:     events.ConnectOptions{URLs: srv.ClientURL(), CredsFile: srv.Creds().InstanceCreds(), Name: fmt.Sprint("kube-", i)},
			Instance: fmt.Sprint("kube-", i),
		})
	}
	writer := &api.Client{BaseURL: apps[2].URL()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var seed strings.Builder
	for i := range 20 {
		fmt.Fprintf(&seed, "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-%02d, namespace: w}, data: {i: \"seed\"}}\n", i)
	}
	if _, err := writer.ApplyBrief(ctx, "seed", []byte(seed.String()), ""); err != nil {
		t.Fatal(err)
	}
	// Both watches start from the list's resourceVersion on the first
	// instance (which has folded the seed).
	list, err := clientset(t, apps[0].URL()).CoreV1().ConfigMaps("w").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := list.ResourceVersion

	var ref []seenEvent
	refDone := make(chan bool, 1)
	rw, err := clientset(t, apps[2].URL()).CoreV1().ConfigMaps("w").Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	go func() { refDone <- collect(t, rw, "zz-end", &ref) }()

	// The writer: updates, creations and deletions, then an end marker.
	writeErr := make(chan error, 1)
	go func() {
		for j := range ops {
			var err error
			switch {
			case j%10 == 9:
				_, err = writer.Delete(ctx, api.Key{Kind: "ConfigMap", Namespace: "w", Name: fmt.Sprint("new-", j-5)})
			case j%5 == 4:
				_, err = writer.ApplyBrief(ctx, "t", fmt.Appendf(nil, "{apiVersion: v1, kind: ConfigMap, metadata: {name: new-%d, namespace: w}, data: {i: \"%d\"}}", j, j), "")
			default:
				_, err = writer.ApplyBrief(ctx, "t", fmt.Appendf(nil, "{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-%02d, namespace: w}, data: {i: \"%d\"}}", j%20, j), "")
			}
			if err != nil {
				writeErr <- fmt.Errorf("write %d: %w", j, err)
				return
			}
		}
		_, err := writer.ApplyBrief(ctx, "t", []byte("{apiVersion: v1, kind: ConfigMap, metadata: {name: zz-end, namespace: w}}"), "")
		writeErr <- err
	}()

	// The moving client: on the first instance until it has a third of
	// the changes, then on the second.
	var got []seenEvent
	w, err := clientset(t, apps[0].URL()).CoreV1().ConfigMaps("w").Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	var stopOnce sync.Once
	for ev := range w.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			t.Fatalf("watch on the first instance sent %s %T: %v", ev.Type, ev.Object, ev.Object)
		}
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		got = append(got, seenEvent{typ: ev.Type, name: cm.Name, rv: rv, val: cm.Data["i"]})
		if len(got) == ops/3 {
			// Stopping ends this stream; events the instance had sent
			// before are still read from it.
			go stopOnce.Do(stops[0])
		}
	}
	if len(got) < ops/3 {
		t.Fatalf("the first instance's watch ended after %d events", len(got))
	}
	last := got[len(got)-1].rv
	t.Logf("moving from the first instance to the second after %d events, at resourceVersion %d", len(got), last)
	w2, err := clientset(t, apps[1].URL()).CoreV1().ConfigMaps("w").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(last, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if !collect(t, w2, "zz-end", &got) {
		t.Fatal("the watch on the second instance ended before the end marker")
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	if !<-refDone {
		t.Fatal("the reference watch ended before the end marker")
	}
	for i := 1; i < len(got); i++ {
		if got[i].rv <= got[i-1].rv {
			t.Errorf("event %d (%s) does not follow %s: repeated or out of order", i, got[i], got[i-1])
		}
	}
	if len(got) != len(ref) {
		t.Errorf("the moving client saw %d events, a watch that stayed saw %d", len(got), len(ref))
	}
	for i := range min(len(got), len(ref)) {
		if got[i] != ref[i] {
			t.Fatalf("event %d: the moving client saw %s, a watch that stayed saw %s", i, got[i], ref[i])
		}
	}
	if len(ref) < ops {
		t.Fatalf("the reference watch saw %d events for %d writes", len(ref), ops)
	}
}
