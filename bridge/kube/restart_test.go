package kube_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/bridge/kube"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// TestBridgeSurvivesAPIServerRestart: the apiserver restarts under a
// synced bridge; changes made after the restart still arrive, and the
// cluster's state shows the outage and the recovery.
func TestBridgeSurvivesAPIServerRestart(t *testing.T) {
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	ctx := t.Context()
	createNamespace(t, cs, "shop")
	log, st := logAndState(t)
	b := startBridge(t, log, st, kube.Cluster{Name: "c1", REST: env.RESTConfig(), Resources: []kube.Resource{configMaps("shop")}})
	waitSynced(t, b)
	cms := cs.CoreV1().ConfigMaps("shop")
	before, err := cms.Create(ctx, configMap("before", map[string]string{"v": "1"}, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string) projections.Key {
		return projections.Key{Kind: "ConfigMap", Namespace: "c1/shop", Name: name}
	}
	eventually(t, 20*time.Second, func() (bool, string) { return st.GetRecord(key("before")) != nil, "before not held" })

	env.StopAPIServer(t)
	eventually(t, 30*time.Second, func() (bool, string) {
		s := b.Status()[0]
		return s.State == kube.StateError, fmt.Sprintf("state %s", s.State)
	})
	env.StartAPIServer(t)

	after, err := cms.Create(ctx, configMap("after", map[string]string{"v": "1"}, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before.Data["v"] = "2"
	if before, err = cms.Update(ctx, before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		return heldVersion(st, key("after")) == after.ResourceVersion && heldVersion(st, key("before")) == before.ResourceVersion,
			fmt.Sprintf("after at %q, before at %q; status %+v", heldVersion(st, key("after")), heldVersion(st, key("before")), b.Status()[0])
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		s := b.Status()[0]
		return s.State == kube.StateSynced, fmt.Sprintf("state %s", s.State)
	})
	s := b.Status()[0]
	t.Logf("after the restart: %d relists, %d answered 410 Gone", s.Relists, s.Gone)

	// An object deleted where no watch can see it (in etcd, with the
	// apiserver down, and the history compacted away): the bridge's watch
	// resumes into 410 Gone, the informer relists, finds the object gone,
	// and the bridge records it as deleted.
	vanishes, err := cms.Create(ctx, configMap("vanishes", map[string]string{"v": "1"}, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) { return st.GetRecord(key("vanishes")) != nil, "vanishes not held" })
	env.StopAPIServer(t)
	rev := etcdDelete(t, env.EtcdURL(), "/registry/configmaps/shop/vanishes")
	etcdCompact(t, env.EtcdURL(), rev)
	env.StartAPIServer(t)
	eventually(t, 60*time.Second, func() (bool, string) {
		return st.GetRecord(key("vanishes")) == nil, fmt.Sprintf("vanishes still held; status %+v", b.Status()[0])
	})
	gone := eventsOf(history(t, log), key("vanishes"))
	if last := gone[len(gone)-1]; last.GetType() != schemas.EventType_EVENT_TYPE_FINALIZED ||
		last.GetId() != kube.EventID("c1", string(vanishes.UID), vanishes.ResourceVersion, kube.Deleted) {
		t.Errorf("last event of the vanished object: %s %s, want Finalized with the id of its last known version", last.GetType(), last.GetId())
	}
	s2 := b.Status()[0]
	if s2.Gone <= s.Gone || s2.Relists <= s.Relists {
		t.Errorf("410 answers %d -> %d, relists %d -> %d; want both to grow", s.Gone, s2.Gone, s.Relists, s2.Relists)
	}
}

// etcdDelete deletes key through etcd's JSON gateway and returns the
// revision after the delete.
func etcdDelete(t *testing.T, etcd, key string) int64 {
	t.Helper()
	var resp struct {
		Header  struct{ Revision string } `json:"header"`
		Deleted string                    `json:"deleted"`
	}
	etcdCall(t, etcd+"/v3/kv/deleterange", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key))}, &resp)
	if resp.Deleted != "1" {
		t.Fatalf("etcd deleted %q keys at %s, want 1", resp.Deleted, key)
	}
	rev, err := strconv.ParseInt(resp.Header.Revision, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// etcdCompact drops etcd's history before rev, so no watch can resume
// from an older revision.
func etcdCompact(t *testing.T, etcd string, rev int64) {
	t.Helper()
	etcdCall(t, etcd+"/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
}

func etcdCall(t *testing.T, url string, req, resp any) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s: %s", url, r.Status, data)
	}
	if resp != nil {
		if err := json.Unmarshal(data, resp); err != nil {
			t.Fatalf("etcd %s: %v: %s", url, err, data)
		}
	}
}
