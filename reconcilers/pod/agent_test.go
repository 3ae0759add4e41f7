package pod_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// logRecorder is a slog handler that keeps every record, to read what an
// agent told its operator.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// find returns the records whose message starts with msg.
func (l *logRecorder) find(msg string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.recs {
		if strings.HasPrefix(r.Message, msg) {
			out = append(out, r)
		}
	}
	return out
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// An agent whose status reports no instance records keeps sending them,
// backing off, and none is lost or reordered once one answers: a node
// never stops telling what its pods do.
func TestStatusReportsAreSentUntilRecorded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := testenv.Log(t, events.Config{})
	nodes, err := l.NodeStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Images().Push(ctx, "workload:v1", bytes.NewReader(workload(t)), 0); err != nil {
		t.Fatal(err)
	}
	conn, err := events.OpenNode(ctx, l.Conn(), "n5")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	ag, err := pod.NewAgent(pod.AgentConfig{Node: "n5", Conn: conn, Dir: t.TempDir(), CompileCache: compileCache, Clock: pod.ScaledClock(scale), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ag.Start(ctx) }()
	defer func() { cancel(); <-done }()
	w := podspec.Work{Namespace: "default", Name: "p", UID: "u1", Generation: 1, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "workload:v1", Args: []string{"hello"}}},
	}}
	data, err := w.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.PutWork(ctx, "n5", "default", "p", data); err != nil {
		t.Fatal(err)
	}
	// No instance serves status: more failed sends than the five an agent
	// once gave up after.
	deadline := time.Now().Add(2 * time.Minute)
	for len(logs.find("pod statuses not recorded")) < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed sends in 2 minutes", len(logs.find("pod statuses not recorded")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Now one does.
	var mu sync.Mutex
	var got []string
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = nodes.ServeNodeStatus(sctx, func(node string, reports [][]byte) []error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range reports {
				ev := new(schemas.Event)
				if err := proto.Unmarshal(r, ev); err != nil {
					t.Error(err)
					continue
				}
				// A report may stand for states passed before it too
				// (decision 0089).
				st := ev.GetObject().GetStatus()
				for _, state := range append(pod.Passed(st), pod.StateOf(st)) {
					got = append(got, node+":"+state)
				}
			}
			return make([]error, len(reports))
		})
	}()
	want := "n5:Registered n5:ImagePull n5:Starting n5:Running n5:Completed"
	deadline = time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		s := strings.Join(got, " ")
		mu.Unlock()
		if s == want {
			break
		}
		if time.Now().After(deadline) || len(s) > len(want) {
			t.Fatalf("recorded %q, want %q", s, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Backing off, doubling from 100 ms: the sixth send waited at least
	// 1.6 s after the fifth (a timer never fires early, whatever the load).
	fails := logs.find("pod statuses not recorded")
	if gap := fails[5].Time.Sub(fails[4].Time); gap < 1600*time.Millisecond {
		t.Fatalf("no backoff: the sixth send came %s after the fifth", gap)
	}
}
