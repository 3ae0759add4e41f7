//go:build unix

package kubeenv

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestEnv drives a real apiserver through what jetplane's tests need: typed
// writes and reads, a restart of the apiserver alone (state kept, open
// watches ended), the kubeconfig file, real authentication, and a teardown
// that leaves no process behind.
func TestEnv(t *testing.T) {
	var pids []int
	t.Run("apiserver", func(t *testing.T) {
		env := Start(t)
		pids = []int{env.etcd.cmd.Process.Pid, env.apiserver.cmd.Process.Pid}
		ctx := t.Context()
		cs, err := kubernetes.NewForConfig(env.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}

		_, wantVersion, _, err := apiserverBinary.cachePath()
		if err != nil {
			t.Fatal(err)
		}
		if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != wantVersion {
			t.Fatalf("server version = %v, %v; want %s", v, err, wantVersion)
		}

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jetplane-testenv"}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cms := cs.CoreV1().ConfigMaps(ns.Name)
		created, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings"},
			Data:       map[string]string{"mode": "fast"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.UID == "" || created.ResourceVersion == "" {
			t.Fatalf("created ConfigMap has no UID or resourceVersion: %+v", created.ObjectMeta)
		}
		got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != created.UID || got.Data["mode"] != "fast" {
			t.Fatalf("read back uid=%s data=%v; want uid=%s data mode=fast", got.UID, got.Data, created.UID)
		}

		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		env.RestartAPIServer(t)
		waitClosed(t, w, 30*time.Second)

		got, err = cms.Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion || got.Data["mode"] != "fast" {
			t.Fatalf("after restart uid=%s rv=%s data=%v; want the object as created (uid=%s rv=%s)",
				got.UID, got.ResourceVersion, got.Data, created.UID, created.ResourceVersion)
		}

		// A watch opened after the restart sees a change made after it.
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Stop()
		got.Data["mode"] = "slow"
		if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w2.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Modified || !ok || cm.Data["mode"] != "slow" {
				t.Fatalf("watch event %s %T %v; want MODIFIED ConfigMap with mode=slow", ev.Type, ev.Object, ev.Object)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event within 30s of the update")
		}

		// The kubeconfig file reaches the same apiserver as the same admin.
		kcfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		kcs, err := kubernetes.NewForConfig(kcfg)
		if err != nil {
			t.Fatal(err)
		}
		nsList, err := kcs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(nsList.Items, func(n corev1.Namespace) bool { return n.Name == ns.Name }) {
			t.Fatalf("namespaces through the kubeconfig lack %s", ns.Name)
		}

		// Authorization is real: a client without the token is anonymous
		// and may not read ConfigMaps.
		anon := env.RESTConfig()
		anon.BearerToken = ""
		acs, err := kubernetes.NewForConfig(anon)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acs.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("anonymous get: err = %v; want Forbidden", err)
		}
		// TLS is verified, not skipped.
		if cfg := env.RESTConfig(); cfg.Insecure || len(cfg.CAData) == 0 {
			t.Fatalf("RESTConfig TLS: insecure=%v, %d bytes of CA", cfg.Insecure, len(cfg.CAData))
		}
	})

	if pids == nil {
		if !t.Failed() {
			t.Skip("nothing started: the subtest skipped")
		}
		return
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after cleanup (kill 0: %v)", pid, err)
		}
	}
}

// waitClosed fails t unless w's channel closes within timeout.
func waitClosed(t *testing.T, w watch.Interface, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch still open %s after the apiserver stopped", timeout)
		}
	}
}
