package testenv

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/events/embedded"
)

// Cluster is a NATS cluster of embedded servers on loopback.
type Cluster struct {
	Servers []*embedded.Server
	// URLs lists every node's client URL, comma-separated.
	URLs string
	// Creds is the instance credential every node admits (the nodes
	// share one credentials store), for events.ConnectOptions.CredsFile.
	Creds string
}

// NATSCluster starts an n-node JetStream cluster of embedded servers, each
// on a temporary store, and waits until JetStream has a leader. Everything
// is shut down by t.Cleanup.
func NATSCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		ports[i] = FreePort(tb)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	store, err := auth.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{Servers: make([]*embedded.Server, n), Creds: store.InstanceCreds()}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Servers[i], errs[i] = embedded.Start(embedded.Config{
				StoreDir: tb.TempDir(), Port: -1, ServerName: fmt.Sprintf("n%d", i+1), AuthDir: store.Dir(),
				Cluster: embedded.ClusterConfig{Name: "jetplane-test", Port: ports[i], Routes: routes},
			})
		}()
	}
	wg.Wait()
	var urls []string
	for i, s := range c.Servers {
		if errs[i] != nil {
			tb.Fatal(errs[i])
		}
		tb.Cleanup(s.Shutdown)
		urls = append(urls, s.ClientURL())
	}
	c.URLs = strings.Join(urls, ",")
	WaitForJetStream(tb, c.URLs, c.Creds)
	return c
}

// WaitForJetStream waits until the NATS cluster at urls (comma-separated)
// has a JetStream leader, for at most a minute, connecting with the creds
// file (an embedded server's instance credential).
func WaitForJetStream(tb testing.TB, urls, creds string) {
	tb.Helper()
	nc, err := nats.Connect(urls, append(credOptions(tb, creds), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))...)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("JetStream cluster has no leader after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Connect opens a client connection to the cluster (any node, reconnecting
// to the others).
func (c *Cluster) Connect(tb testing.TB) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(c.URLs, append(credOptions(tb, c.Creds), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// StreamLeader returns the node leading stream, waiting for it to have a
// leader.
func (c *Cluster) StreamLeader(tb testing.TB, stream string) *embedded.Server {
	tb.Helper()
	js, err := jetstream.New(c.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := js.Stream(ctx, stream)
		cancel()
		if err == nil && s.CachedInfo().Cluster != nil {
			for _, srv := range c.Servers {
				if srv.Name() == s.CachedInfo().Cluster.Leader {
					return srv
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("stream %s has no leader after a minute: %v", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func credOptions(tb testing.TB, creds string) []nats.Option {
	tb.Helper()
	opts, err := events.CredsOptions(creds)
	if err != nil {
		tb.Fatal(err)
	}
	return opts
}
