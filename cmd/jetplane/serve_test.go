package main

import (
	"bytes"
	"strings"
	"testing"
)

// serve refuses to put an open API (every caller an admin) on an address
// other than loopback unless told to on purpose; the check runs before
// anything starts.
func TestServeRefusesAnOpenAPIBeyondLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "10.1.2.3:7070"} {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"serve", "--listen", listen, "--data", t.TempDir()})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "--token-file") || !strings.Contains(err.Error(), "--allow-anonymous") {
			t.Errorf("serve --listen %s without tokens: %v, want a refusal naming --token-file and --allow-anonymous", listen, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "localhost:7070": true, "[::1]:7070": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.1:7070": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// Routes beyond loopback without a secret or TLS would let anyone who
// reaches the port join the cluster as a trusted peer: refused, naming the
// flag that fixes it.
func TestServeRefusesOpenRoutesBeyondLoopback(t *testing.T) {
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"serve", "--data", t.TempDir(), "--nats-port", "-1", "--nats-name", "n1", "--nats-cluster", "jp",
		"--nats-cluster-listen", "0.0.0.0:0", "--node=false"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--nats-route-secret-file") {
		t.Errorf("serve with open routes on 0.0.0.0: %v, want a refusal naming --nats-route-secret-file", err)
	}
}
