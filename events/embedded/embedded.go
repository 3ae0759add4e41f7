// Package embedded runs the NATS server with JetStream inside the jetplane
// process: the default single-process deployment and every test's log.
// It listens on loopback unless told otherwise, admits only the
// credentials of its store (package events/auth; reloaded when they
// change), and hands out in-process connections with the instance
// credential, which skip the network stack entirely.
package embedded

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetplane/jetplane/events/auth"
)

// Config configures the embedded server.
type Config struct {
	// StoreDir holds JetStream's files. Required.
	StoreDir string
	// Host to listen on for outside clients; default 127.0.0.1.
	Host string
	// Port for outside clients; 0 picks the NATS default 4222, -1 a free port.
	Port int
	// SyncAlways fsyncs every write before acknowledging it. Without it the
	// server fsyncs every SyncInterval (default 2 min), and a machine crash
	// (not a process crash) can lose the writes of the last interval.
	SyncAlways bool
	// SyncInterval overrides the periodic fsync interval when SyncAlways is off.
	SyncInterval time.Duration
	// ServerName names this node; default "jetplane".
	ServerName string
	// Logs makes the server log to stderr (its own format).
	Logs bool
	// Cluster, when it has a Name, makes this server one node of a NATS
	// cluster: several jetplane processes then form a JetStream cluster
	// with replicated streams and no other software.
	Cluster ClusterConfig
	// AuthDir is the credentials store (package events/auth); default
	// StoreDir/auth, created with an instance credential on first start.
	// Nodes of one cluster may share one, so that a credential works on
	// every node.
	AuthDir string
	// TLS, when it has a cert, makes the client port speak TLS only and,
	// in a cluster, the routes mutual TLS (each node presents the cert
	// and verifies the others' against the CA). In-process connections
	// need none.
	TLS TLSConfig
}

// TLSConfig names PEM files.
type TLSConfig struct {
	CertFile, KeyFile, CAFile string
}

// ClusterConfig joins the embedded server to a cluster.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Host and Port are where this node listens for routes from the
	// others (Host default 127.0.0.1; Port -1 picks a free one).
	Host string
	Port int
	// Routes are the other nodes' route URLs, such as
	// nats://10.0.0.2:6222. Listing this node's own URL too is harmless.
	Routes []string
	// Secret, the same on every node, authenticates routes: a node
	// accepts a route only from a peer that presents it, and presents it
	// on its own routes. A route is a peer server, beyond every account
	// and permission, so routes that listen beyond loopback need it or
	// mutual TLS.
	Secret string
}

// RouteUser is the user name routes present with the cluster's secret.
const RouteUser = "jetplane-route"

// minRouteSecret is the shortest route secret accepted: 32 random
// characters, as `openssl rand -hex 16` gives.
const minRouteSecret = 32

func (c Config) validate() error {
	if c.StoreDir == "" {
		return errors.New("embedded nats: store dir is required")
	}
	if c.Host != "" && net.ParseIP(c.Host) == nil && c.Host != "localhost" {
		return fmt.Errorf("embedded nats: host %q is not an IP address", c.Host)
	}
	if c.SyncAlways && c.SyncInterval != 0 {
		return errors.New("embedded nats: sync always and a sync interval exclude each other; set one")
	}
	if c.Cluster.Name == "" && (len(c.Cluster.Routes) > 0 || c.Cluster.Port != 0) {
		return errors.New("embedded nats: cluster routes or port given without a cluster name; set the name")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") || (c.TLS.CAFile != "" && c.TLS.CertFile == "") {
		return errors.New("embedded nats: tls needs a cert file and a key file (and a CA file for cluster routes)")
	}
	if c.TLS.CertFile != "" && c.Cluster.Name != "" && c.TLS.CAFile == "" {
		return errors.New("embedded nats: tls on cluster routes needs a CA file to verify the other nodes; give --nats-tls-ca")
	}
	if c.Cluster.Name != "" && c.ServerName == "" {
		return errors.New("embedded nats: every node of a cluster needs its own server name")
	}
	for _, r := range c.Cluster.Routes {
		if u, err := url.Parse(r); err != nil || u.Host == "" {
			return fmt.Errorf("embedded nats: route %q is not a URL such as nats://10.0.0.2:6222", r)
		}
	}
	if c.Cluster.Secret != "" && len(c.Cluster.Secret) < minRouteSecret {
		return fmt.Errorf("embedded nats: the route secret has %d characters; use at least %d random ones (openssl rand -hex 16)", len(c.Cluster.Secret), minRouteSecret)
	}
	if c.Cluster.Name != "" && c.Cluster.Secret == "" && c.TLS.CertFile == "" && !loopbackHost(c.Cluster.Host) {
		return fmt.Errorf("embedded nats: cluster routes listen on %s without authentication, and a route is trusted beyond every credential: anyone who reaches the port could join the cluster and read and write the log; give every node the same --nats-route-secret-file, or mutual TLS (--nats-tls-cert, --nats-tls-key, --nats-tls-ca)", c.Cluster.Host)
	}
	return nil
}

// loopbackHost reports whether host (an IP address, "localhost" or empty,
// which means 127.0.0.1 here) is reachable only from this machine.
func loopbackHost(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is a running embedded NATS server.
type Server struct {
	ns        *server.Server
	unlock    func()
	creds     *auth.Store
	admit     *credentials
	storeDir  string
	clustered bool
	stop      chan struct{}
	stopOnce  sync.Once
	done      sync.WaitGroup

	watch *storeWatch
	syncState
	// optsMu guards opts and keeps restarts of JetStream apart.
	optsMu sync.Mutex
	opts   *server.Options
}

// MaxConsumersPerStream bounds the consumers of each stream.
const MaxConsumersPerStream = 10_000

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName:         cfg.ServerName,
		Host:               cfg.Host,
		Port:               cfg.Port,
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		NoSigs:             true,
		MaxPayload:         4 << 20,
		JetStreamMaxMemory: -1,
		JetStreamMaxStore:  -1,
		// Consumers per stream: the server's default (1,000) is what one
		// credential could fill and so break every reader's reads; each
		// outside credential is held to auth.DefaultMaxConsumers, and
		// the rest is the instances' reserve (decision 0040).
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: MaxConsumersPerStream},
	}
	if opts.ServerName == "" {
		opts.ServerName = "jetplane"
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if cfg.SyncAlways {
		opts.SyncAlways = true
	}
	if cfg.SyncInterval > 0 {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cl := cfg.Cluster; cl.Name != "" {
		opts.Cluster.Name = cl.Name
		opts.Cluster.Host = cl.Host
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = "127.0.0.1"
		}
		opts.Cluster.Port = cl.Port
		if opts.Cluster.Port == 0 {
			opts.Cluster.Port = 6222
		}
		opts.Routes = server.RoutesFromStr(strings.Join(cl.Routes, ","))
		if cl.Secret != "" {
			opts.Cluster.Username, opts.Cluster.Password = RouteUser, cl.Secret
			for _, r := range opts.Routes {
				if r.User == nil {
					r.User = url.UserPassword(RouteUser, cl.Secret)
				}
			}
		}
	}
	if t := cfg.TLS; t.CertFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile})
		if err != nil {
			return nil, fmt.Errorf("embedded nats: tls: %w", err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, tc, 5
		if opts.Cluster.Name != "" {
			rc := tc.Clone()
			rc.ClientAuth = tls.RequireAndVerifyClientCert
			rc.RootCAs = rc.ClientCAs
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = rc, 5
		}
	}
	// The server only logs a port it cannot bind and then never becomes
	// ready; check first, so the error says what to change.
	if err := portFree(opts.Host, opts.Port, "--nats-port"); err != nil {
		return nil, err
	}
	if opts.Cluster.Name != "" {
		if err := portFree(opts.Cluster.Host, opts.Cluster.Port, "--nats-cluster-listen"); err != nil {
			return nil, err
		}
	}
	unlock, err := lockDir(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	if cfg.AuthDir == "" {
		cfg.AuthDir = filepath.Join(cfg.StoreDir, "auth")
	}
	creds, err := auth.Open(cfg.AuthDir)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	// Nothing connects without a credential: no users means no access.
	loaded := creds.UsersStamp()
	users, err := creds.Users()
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	admit := newCredentials(users)
	opts.CustomClientAuthentication, opts.AlwaysEnableNonce = admit, true
	ns, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if cfg.Logs {
		ns.ConfigureLogger()
	}
	// The server's log says when its store breaks (see storage.go).
	watch := &storeWatch{inner: ns.Logger()}
	ns.SetLoggerV2(watch, opts.Debug, opts.Trace, false)
	ns.Start()
	const ready = 60 * time.Second
	if !ns.ReadyForConnections(ready) {
		ns.Shutdown()
		unlock()
		return nil, fmt.Errorf("embedded nats: not ready after %s; run with --nats-log to see why", ready)
	}
	s := &Server{ns: ns, unlock: unlock, creds: creds, admit: admit, storeDir: opts.StoreDir, clustered: opts.Cluster.Name != "", opts: opts, stop: make(chan struct{}), watch: watch}
	_ = creds.MarkLoaded(loaded)
	s.every(credsPoll, s.reloadCreds(loaded))
	s.every(storeMendPoll, s.mendStore)
	return s, nil
}

// every runs f every d until the server stops.
func (s *Server) every(d time.Duration, f func()) {
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// Connect opens an in-process connection to the server with the instance
// credential.
func (s *Server) Connect(name string) (*nats.Conn, error) {
	nk, err := nats.NkeyOptionFromSeed(s.creds.InstanceCreds())
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	return nats.Connect("", nats.InProcessServer(s.ns), nats.Name(name), nats.MaxReconnects(-1), nk)
}

// Creds is the server's credentials store.
func (s *Server) Creds() *auth.Store { return s.creds }

// credsPoll is how often the server looks for changed credentials.
const credsPoll = 500 * time.Millisecond

// reloadCreds returns what reloads the server's users whenever the store's
// users file changes (`jetplane creds create|revoke` from another
// process), run every credsPoll: a new credential works within credsPoll,
// and a revoked one, or one whose permissions changed, is disconnected
// (to reconnect under its new permissions, or not at all). last is the
// users file loaded at start. The server's options are never reloaded
// (see credentials).
func (s *Server) reloadCreds(last string) func() {
	return func() {
		now := s.creds.UsersStamp()
		if now == last {
			return
		}
		users, err := s.creds.Users()
		if err != nil {
			s.ns.Errorf("credentials not reloaded: %v", err)
			return
		}
		if changed := s.admit.set(users); len(changed) > 0 {
			s.disconnect(changed)
		}
		last = now
		_ = s.creds.MarkLoaded(now)
	}
}

// disconnect closes the client connections of the given public keys.
func (s *Server) disconnect(keys []string) {
	gone := make(map[string]bool, len(keys))
	for _, k := range keys {
		gone[k] = true
	}
	cz, err := s.ns.Connz(&server.ConnzOptions{Username: true, Limit: math.MaxInt32})
	if err != nil {
		s.ns.Errorf("credentials: list connections: %v", err)
		return
	}
	for _, c := range cz.Conns {
		if gone[c.AuthorizedUser] {
			_ = s.ns.DisconnectClientByID(c.Cid)
		}
	}
}

// portFree reports a fixed port that is already taken, naming the flag
// that sets it. Port -1 (any free port) always passes.
func portFree(host string, port int, flag string) error {
	if port <= 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("embedded nats: cannot listen on %s:%d (%v); choose another port with %s (-1 picks a free one)", host, port, err, flag)
	}
	return l.Close()
}

// ClusterURL is this node's route URL, for the other nodes' Routes ("" when
// not clustered).
func (s *Server) ClusterURL() string {
	addr := s.ns.ClusterAddr()
	if addr == nil {
		return ""
	}
	return "nats://" + addr.String()
}

// Name is the server's name in its cluster.
func (s *Server) Name() string { return s.ns.Name() }

// ClientURL is the URL outside clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.done.Wait()
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.closeSynced()
	s.unlock()
}
