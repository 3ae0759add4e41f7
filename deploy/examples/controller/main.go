// Command cloudctl is an out-of-process jetplane controller of three
// dependent kinds (a Network, a Cluster on it, an App on the cluster),
// reconciled against a simulated cloud with failures and latency. Run as
// many replicas as you like: they share the kinds' partitions.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jetplane/jetplane/reconcilers/controller"
	"github.com/jetplane/jetplane/schemas"
)

// infra reconciles the three kinds against the cloud.
type infra struct {
	cloud  *cloud
	resync time.Duration
}

func (infra) Kinds() []string {
	return []string{"Network.example.com", "Cluster.example.com", "App.example.com"}
}

// Reconcile makes obj in the cloud, on the resource its spec names, and
// runs again after the resync period to find drift.
func (i infra) Reconcile(ctx context.Context, obj *schemas.Object) (controller.Status, time.Duration, error) {
	id, parent := ids(obj)
	if err := i.cloud.create(id, parent); err != nil {
		return controller.Status{}, 0, err
	}
	return controller.Status{Message: "exists in the cloud",
		Fields: map[string]any{"cloudID": id, "verified": time.Now().UTC().Format(time.RFC3339)}}, i.resync, nil
}

// Delete removes obj from the cloud; the runtime calls it only once the
// objects that depend on obj are gone.
func (i infra) Delete(ctx context.Context, obj *schemas.Object) error {
	id, _ := ids(obj)
	return i.cloud.remove(id)
}

// ids are the cloud's names of obj and of the resource it sits on.
func ids(obj *schemas.Object) (id, parent string) {
	m := obj.GetMetadata()
	kind := strings.ToLower(obj.GetKind())
	id = kind + "/" + m.GetNamespace() + "/" + m.GetName()
	spec := obj.GetSpec().GetFields()
	switch kind {
	case "cluster":
		parent = "network/" + m.GetNamespace() + "/" + spec["network"].GetStringValue()
	case "app":
		parent = "cluster/" + m.GetNamespace() + "/" + spec["cluster"].GetStringValue()
	}
	return id, parent
}

func main() {
	var cfg controller.Config
	var dir string
	var failRate float64
	var latency, resync time.Duration
	flag.StringVar(&cfg.NATS, "nats", "nats://127.0.0.1:4222", "jetplane's NATS")
	flag.StringVar(&cfg.Creds, "creds", "cloud.creds", "controller credential (jetplane creds create --role controller)")
	flag.StringVar(&cfg.Instance, "instance", "", "this replica's name (default host-pid)")
	flag.StringVar(&dir, "cloud-dir", "cloud", "the simulated cloud's directory, shared by the replicas")
	flag.Float64Var(&failRate, "fail-rate", 0.3, "share of cloud calls that fail")
	flag.DurationVar(&latency, "latency", 50*time.Millisecond, "typical latency of a cloud call")
	flag.DurationVar(&resync, "resync", 30*time.Second, "how often each object is checked again")
	flag.Parse()
	c, err := newCloud(dir, failRate, latency)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := controller.Run(ctx, cfg, infra{cloud: c, resync: resync}); err != nil {
		log.Fatal(err)
	}
}
