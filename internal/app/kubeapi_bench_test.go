package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

const informerObjects = 10000

// BenchmarkInformerSync measures how long a client-go informer takes to
// list and sync 10,000 ConfigMaps, the same client against jetplane and
// against kube-apiserver with etcd, in one run.
func BenchmarkInformerSync(b *testing.B) {
	b.Run("jetplane", func(b *testing.B) {
		a, c := startApp(b, app.Config{SyncAlways: true})
		for i := 0; i < informerObjects; i += events.MaxBatch {
			var sb strings.Builder
			for j := i; j < min(informerObjects, i+events.MaxBatch); j++ {
				fmt.Fprintf(&sb, "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: cm-%05d, namespace: load}, data: {i: \"%d\"}}\n", j, j)
			}
			if _, err := c.ApplyBrief(context.Background(), "load", []byte(sb.String()), ""); err != nil {
				b.Fatal(err)
			}
		}
		benchSync(b, &rest.Config{Host: a.URL(), QPS: 1000, Burst: 1000})
	})
	b.Run("kube-apiserver", func(b *testing.B) {
		env := kubeenv.Start(b)
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig())
		ctx := context.Background()
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < informerObjects; j += 16 {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", j), Namespace: "load"}, Data: map[string]string{"i": fmt.Sprint(j)}}
					if _, err := cs.CoreV1().ConfigMaps("load").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		benchSync(b, env.RESTConfig())
	})
}

func benchSync(b *testing.B, cfg *rest.Config) {
	b.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("load"))
		inf := factory.Core().V1().ConfigMaps().Informer()
		factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) || len(inf.GetStore().ListKeys()) != informerObjects {
			b.Fatalf("informer synced %d objects", len(inf.GetStore().ListKeys()))
		}
		cancel()
		factory.Shutdown()
	}
	b.ReportMetric(float64(informerObjects*b.N)/time.Since(start).Seconds(), "objects/s")
}
