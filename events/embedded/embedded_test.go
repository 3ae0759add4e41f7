package embedded

import (
	"net"
	"strings"
	"testing"
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
