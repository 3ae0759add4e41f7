package embedded

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestStartRefusesBadConfig(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no store", Config{}, "store dir is required"},
		{"host not an address", Config{StoreDir: t.TempDir(), Host: "example"}, "not an IP address"},
		{"sync twice", Config{StoreDir: t.TempDir(), SyncAlways: true, SyncInterval: 1}, "exclude each other"},
		{"routes without a cluster", Config{StoreDir: t.TempDir(), Cluster: ClusterConfig{Routes: []string{"nats://127.0.0.1:6222"}}}, "without a cluster name"},
		{"cluster without a server name", Config{StoreDir: t.TempDir(), Cluster: ClusterConfig{Name: "c"}}, "own server name"},
		{"bad route", Config{StoreDir: t.TempDir(), ServerName: "n1", Cluster: ClusterConfig{Name: "c", Routes: []string{"::bad"}}}, "is not a URL"},
		{"client port taken", Config{StoreDir: t.TempDir(), Port: port}, "choose another port with --nats-port"},
		{"open routes beyond loopback", Config{StoreDir: t.TempDir(), ServerName: "n1", Cluster: ClusterConfig{Name: "c", Host: "0.0.0.0"}}, "--nats-route-secret-file"},
		{"short route secret", Config{StoreDir: t.TempDir(), ServerName: "n1", Cluster: ClusterConfig{Name: "c", Secret: "short"}}, "at least 32"},
		{"route port taken", Config{StoreDir: t.TempDir(), Port: -1, ServerName: "n1", Cluster: ClusterConfig{Name: "c", Port: port}}, "--nats-cluster-listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(tt.cfg)
			if err == nil {
				s.Shutdown()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// Two servers on one store would corrupt it: the second is refused until
// the first stops.
func TestStoreDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := Start(Config{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Start(Config{StoreDir: dir, Port: -1}); err == nil {
		s.Shutdown()
		first.Shutdown()
		t.Fatal("a second server started on a store in use")
	} else if !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("err = %v, want it to say the store is in use", err)
	}
	first.Shutdown()
	first.Shutdown() // idempotent
	again, err := Start(Config{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	again.Shutdown()
}

// A route is a peer server, trusted beyond every credential: with a route
// secret, a node joins the cluster only if it presents the same secret.
func TestRoutesNeedTheClusterSecret(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	start := func(name, secret string, routes ...string) *Server {
		t.Helper()
		s, err := Start(Config{StoreDir: t.TempDir(), Port: -1, ServerName: name,
			Cluster: ClusterConfig{Name: "jp", Port: -1, Routes: routes, Secret: secret}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		return s
	}
	a := start("a", secret)
	at := "nats://" + a.ns.ClusterAddr().String()
	wrong := start("wrong", "fedcba9876543210fedcba9876543210", at)
	none := start("none", "", at)
	b := start("b", secret, at)
	deadline := time.Now().Add(30 * time.Second)
	for a.ns.NumRoutes() == 0 || b.ns.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a node with the secret did not join: routes a=%d b=%d", a.ns.NumRoutes(), b.ns.NumRoutes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The two refused nodes tried first (their first attempt is at start)
	// and go on trying; give them a moment more, then none may be a peer.
	time.Sleep(time.Second)
	if n := wrong.ns.NumRoutes(); n != 0 {
		t.Errorf("a node with the wrong secret has %d routes", n)
	}
	if n := none.ns.NumRoutes(); n != 0 {
		t.Errorf("a node without a secret has %d routes", n)
	}
	for _, r := range a.routes() {
		if r != "b" {
			t.Errorf("a is routed to %q; only b presented the secret", r)
		}
	}
}

// routes names the servers this one has routes to.
func (s *Server) routes() []string {
	rz, err := s.ns.Routez(nil)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rz.Routes {
		out = append(out, r.RemoteName)
	}
	return out
}
