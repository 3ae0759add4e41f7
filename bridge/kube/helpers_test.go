package kube_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// testLogger discards logs unless JETPLANE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("JETPLANE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// logAndState opens a log on an embedded NATS server and follows it with
// a projection, stopped at cleanup.
func logAndState(tb testing.TB) (*events.Log, *projections.Store) {
	tb.Helper()
	log := testenv.Log(tb, events.Config{})
	return log, follow(tb, log)
}

// follow runs a projection of log until cleanup.
func follow(tb testing.TB, log *events.Log) *projections.Store {
	tb.Helper()
	st := projections.NewStore(projections.StoreOptions{})
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: log, Store: st, Logger: testLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return st
}

// running is a started bridge.
type running struct {
	*kube.Bridge
	stop func()
}

// startBridge runs a bridge for clusters until stop or cleanup.
func startBridge(tb testing.TB, log kube.Log, st kube.Reader, clusters ...kube.Cluster) *running {
	tb.Helper()
	b, err := kube.New(kube.Config{Clusters: clusters, Log: log, State: st, Logger: testLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("bridge stopped with %v", err)
		}
	}
	tb.Cleanup(stop)
	return &running{Bridge: b, stop: stop}
}

// waitSynced waits until every cluster of b has synced.
func waitSynced(tb testing.TB, b *running) {
	tb.Helper()
	eventually(tb, time.Minute, func() (bool, string) {
		err := b.Ready()
		return err == nil, fmt.Sprint(err)
	})
}

// eventually polls cond until it holds or the deadline passes; cond's
// message says what it saw.
func eventually(tb testing.TB, timeout time.Duration, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %s: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// history reads every event in the log.
func history(tb testing.TB, log *events.Log) []*schemas.Event {
	tb.Helper()
	var out []*schemas.Event
	err := log.Read(context.Background(), events.ReadOptions{}, func(m events.Message) error {
		ev, err := m.Event()
		if err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// eventsOf filters events of key k.
func eventsOf(evs []*schemas.Event, k projections.Key) []*schemas.Event {
	var out []*schemas.Event
	for _, ev := range evs {
		if projections.KeyOf(ev.GetKey()) == k {
			out = append(out, ev)
		}
	}
	return out
}

func clientset(tb testing.TB, env *kubeenv.Env) *kubernetes.Clientset {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func createNamespace(tb testing.TB, cs kubernetes.Interface, name string) {
	tb.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

func configMap(name string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
}

// configMaps is the resource of every ConfigMap in namespace ns.
func configMaps(ns string) kube.Resource {
	return kube.Resource{Version: "v1", Resource: "configmaps", Namespace: ns}
}

// heldVersion is the Kubernetes resourceVersion current state holds for k,
// "" when it holds nothing.
func heldVersion(st *projections.Store, k projections.Key) string {
	return st.GetRecord(k).GetMetadata().GetAnnotations()[projections.AnnotationResourceVersion]
}

// idCounts counts events per id, for ids that start with prefix.
func idCounts(evs []*schemas.Event, prefix string) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		if strings.HasPrefix(ev.GetId(), prefix) {
			out[ev.GetId()]++
		}
	}
	return out
}

type kubeClient = kubernetes.Interface
