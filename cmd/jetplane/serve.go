package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
)

func newServe() *cobra.Command {
	var (
		cfg             app.Config
		sync            string
		tokenFile       string
		anonymous       bool
		clusters        string
		routes          string
		clusterAt       string
		routeSecretFile string
		logLevel        string
		logFormat       string
		nodeFlags       = &serveNodeFlags{}
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: log, projection and API in one process",
		Long: `Run jetplane in one process: an embedded NATS server with JetStream storing
the log in --data, the projection of current state, and the HTTP API.

Durability: by default the embedded server fsyncs the log every 2 minutes, so
a machine crash (not a process crash) may lose the last interval's events.
--sync=always fsyncs every event before it is acknowledged, at a cost in
throughput (see docs/BENCHMARKS.md). --sync=DURATION sets the interval.

With --nats-url, jetplane uses an outside NATS deployment instead of
embedding a server.

The embedded NATS server admits only credentials from its store (DATA/auth,
made on the first start): jetplane's own, and those 'jetplane creds create'
hands out. Secrets are sealed in the log with the keys of
--encryption-key-file (default DATA/auth/encryption.keys, made on the first
start). See the README, "Security", for roles, tokens and the production
setup with TLS.

With --clusters, jetplane watches Kubernetes clusters and records every
change of the configured resources as an Observed event (see the README,
"Kubernetes", for the file's format); /readyz waits until each
cluster has synced, and 'jetplane clusters' shows how each one is doing.

Every flag can also be set by environment variable JETPLANE_<FLAG>, upper
case with '-' as '_' (JETPLANE_NATS_URL, JETPLANE_DATA, ...).

The Go garbage collector runs at GOGC=200 unless GOGC is set.`,
		Example: `  jetplane serve
  jetplane serve --data /var/lib/jetplane --listen 127.0.0.1:7070 --sync=always
  jetplane serve --clusters clusters.yaml
  jetplane serve --nats-url nats://n1:4222,nats://n2:4222 --nats-creds app.creds --replicas 3
  jetplane serve --data d1 --nats-name n1 --nats-cluster jp --nats-cluster-listen 127.0.0.1:6222 \
      --nats-routes nats://127.0.0.1:6222,nats://127.0.0.1:6223,nats://127.0.0.1:6224 --replicas 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			logger, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			slog.SetDefault(logger)
			if os.Getenv("GOGC") == "" {
				// The projection is a large heap that lives as long as the
				// process; collecting at 200% growth instead of 100% halves
				// the GC work of a replay (docs/BENCHMARKS.md) for a
				// bounded amount of memory. GOGC overrides it.
				debug.SetGCPercent(200)
			}
			switch sync {
			case "always":
				cfg.SyncAlways = true
			case "", "default":
			default:
				d, err := time.ParseDuration(sync)
				if err != nil || d <= 0 {
					return fmt.Errorf("--sync: %q is neither \"always\" nor a positive duration such as 30s", sync)
				}
				cfg.SyncInterval = d
			}
			if tokenFile != "" {
				if cfg.Principals, err = readTokens(tokenFile); err != nil {
					return err
				}
			} else if tok := os.Getenv("JETPLANE_API_TOKEN"); tok != "" {
				cfg.Tokens = map[string]string{tok: "admin"}
			}
			if len(cfg.Principals) == 0 && len(cfg.Tokens) == 0 && !anonymous && !loopback(cfg.Listen) {
				return fmt.Errorf("--listen %s: the API would answer every caller that reaches it as admin; give it tokens with --token-file (or JETPLANE_API_TOKEN), listen on 127.0.0.1, or run it open on purpose with --allow-anonymous", cfg.Listen)
			}
			if clusters != "" {
				if cfg.Clusters, err = kube.LoadFile(clusters); err != nil {
					return fmt.Errorf("--clusters: %w", err)
				}
			}
			if routes != "" {
				cfg.NATSCluster.Routes = strings.Split(routes, ",")
			}
			if routeSecretFile != "" {
				b, err := os.ReadFile(routeSecretFile)
				if err != nil {
					return fmt.Errorf("--nats-route-secret-file: %w", err)
				}
				if cfg.NATSCluster.Secret = strings.TrimSpace(string(b)); cfg.NATSCluster.Secret == "" {
					return fmt.Errorf("--nats-route-secret-file: %s is empty; put the same random secret (openssl rand -hex 16) in it on every node", routeSecretFile)
				}
			}
			if clusterAt != "" {
				host, port, err := net.SplitHostPort(clusterAt)
				if err != nil {
					return fmt.Errorf("--nats-cluster-listen: %q is not host:port, such as 127.0.0.1:6222", clusterAt)
				}
				cfg.NATSCluster.Host = host
				if cfg.NATSCluster.Port, err = strconv.Atoi(port); err != nil {
					return fmt.Errorf("--nats-cluster-listen: port %q is not a number", port)
				}
			}
			if err := nodeFlags.apply(&cfg); err != nil {
				return err
			}
			a, err := app.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", "./data", "directory of the embedded NATS server's store")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "API listen address")
	f.StringVar(&sync, "sync", "default", `fsync policy of the embedded server: "always", or an interval such as 1s (default 2m)`)
	f.StringVar(&cfg.NATSHost, "nats-host", "127.0.0.1", "address the embedded NATS server listens on for outside clients")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "port of the embedded NATS server (-1 picks a free one)")
	f.StringVar(&cfg.NATSName, "nats-name", "", "name of the embedded NATS server (required and unique per node in a cluster)")
	f.StringVar(&cfg.NATSCluster.Name, "nats-cluster", "", "join the embedded NATS server to this cluster of jetplane processes")
	f.StringVar(&clusterAt, "nats-cluster-listen", "", "host:port this node takes routes on (default 127.0.0.1:6222)")
	f.StringVar(&routes, "nats-routes", "", "route URLs of the cluster's nodes, comma-separated, such as nats://10.0.0.1:6222,nats://10.0.0.2:6222")
	f.StringVar(&routeSecretFile, "nats-route-secret-file", "", "file holding the secret every node of the cluster presents on its routes (at least 32 characters; required for routes beyond loopback unless --nats-tls-* is given)")
	f.StringVar(&cfg.NATSAuthDir, "nats-auth-dir", "", "credentials store of the embedded NATS server (default DATA/auth; nodes of one cluster may share one)")
	f.BoolVar(&cfg.NATSLogs, "nats-log", false, "let the embedded NATS server log to stderr (its own format)")
	f.StringVar(&cfg.NATS.URLs, "nats-url", "", "outside NATS servers (comma-separated); disables the embedded server")
	f.StringVar(&cfg.NATS.CredsFile, "nats-creds", "", "NATS credentials file for --nats-url")
	f.StringVar(&cfg.NATS.CAFile, "nats-ca", "", "CA certificate to trust for NATS TLS")
	f.StringVar(&cfg.NATS.CertFile, "nats-cert", "", "client certificate for NATS TLS")
	f.StringVar(&cfg.NATS.KeyFile, "nats-key", "", "client key for NATS TLS")
	f.IntVar(&cfg.Log.Partitions, "partitions", 16, "partitions of the key space (fixed when the log is created)")
	f.IntVar(&cfg.Log.Replicas, "replicas", 1, "replicas of the log stream (3 on a NATS cluster)")
	f.DurationVar(&cfg.Log.MaxAge, "retention-age", 0, "drop events older than this (0 keeps them forever)")
	f.Int64Var(&cfg.Log.MaxBytes, "retention-bytes", 0, "cap the log at this many bytes, dropping the oldest events (0 is unlimited)")
	f.StringVar(&cfg.Pods.SchedulerConfig, "scheduler-config", "", "scheduler config file (YAML): profiles by schedulerName, their plugins, weights and args, WebAssembly plugins from a file (guestPath) or the image store (image: NAME:TAG); default: kube-scheduler's default plugins")
	f.StringVar(&clusters, "clusters", "", "file (YAML or JSON) of Kubernetes clusters and resources to watch; see the README")
	f.StringVar(&cfg.NATSTLS.CertFile, "nats-tls-cert", "", "certificate of the embedded NATS server: its client port speaks TLS only, and so do its routes")
	f.StringVar(&cfg.NATSTLS.KeyFile, "nats-tls-key", "", "key of --nats-tls-cert")
	f.StringVar(&cfg.NATSTLS.CAFile, "nats-tls-ca", "", "CA that signs every cluster node's certificate (routes verify each other with it)")
	f.StringVar(&cfg.TLSCertFile, "tls-cert", "", "certificate of the API: it serves HTTPS only")
	f.StringVar(&cfg.TLSKeyFile, "tls-key", "", "key of --tls-cert")
	f.StringVar(&cfg.EncryptionKeyFile, "encryption-key-file", "", "key-encryption keys that seal Secrets (jetplane keys rotate makes one); default DATA/auth/encryption.keys, generated")
	f.StringVar(&tokenFile, "token-file", "", `file of API bearer tokens, one "TOKEN NAME [ROLE [NAMESPACES]]" per line (ROLE admin, writer, reader, +secrets; NAMESPACES a,b or *); without it (and without JETPLANE_API_TOKEN) the API is open`)
	f.BoolVar(&cfg.SubscriptionPrivateSinks, "subscription-private-sinks", false, "let Subscriptions deliver to loopback, private and link-local addresses (refused by default, so a subscription cannot reach the control plane's own network)")
	f.BoolVar(&anonymous, "allow-anonymous", false, "let the API answer without tokens on an address other than loopback (everyone who reaches it acts as admin); refused otherwise")
	f.Float64Var(&cfg.APILimits.Rate, "api-rate", 100, "API requests per second one token may make on average (negative: unlimited); over it, 429 with Retry-After")
	f.IntVar(&cfg.APILimits.Burst, "api-burst", 0, "API requests one token may make at once (default 2 × --api-rate)")
	f.IntVar(&cfg.APILimits.Watches, "api-watches", 32, "watches one token may hold open (negative: unlimited)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	nodeFlags.register(f)
	cmd.Flags().SortFlags = false
	return cmd
}

// applyEnv sets every flag not given on the command line from
// JETPLANE_<FLAG> when that variable is set.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "JETPLANE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// readTokens reads "TOKEN NAME [ROLE [NAMESPACES]]" lines: ROLE is admin
// (the default), writer or reader, with "+secrets" to see secret values;
// NAMESPACES is a comma-separated list, or "*" for all. Blank lines and #
// comments are skipped.
func readTokens(path string) ([]api.Principal, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	var ps []api.Principal
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 4 {
			return nil, fmt.Errorf("--token-file %s, line %d: want \"TOKEN NAME [ROLE [NAMESPACES]]\", got %d fields", path, n, len(fields))
		}
		if first, ok := seen[fields[0]]; ok {
			return nil, fmt.Errorf("--token-file %s, line %d: the token of line %d again; every token must be different", path, n, first)
		}
		seen[fields[0]] = n
		p := api.Principal{Token: fields[0], Name: fields[1], Role: api.RoleAdmin}
		if len(fields) > 2 {
			role, secrets := strings.CutSuffix(fields[2], "+secrets")
			if p.Role, err = api.ParseRole(role); err != nil {
				return nil, fmt.Errorf("--token-file %s, line %d: %w", path, n, err)
			}
			p.ShowSecrets = secrets
		}
		if len(fields) > 3 && fields[3] != "*" {
			p.Namespaces = strings.Split(fields[3], ",")
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	if len(ps) == 0 {
		return nil, errors.New("--token-file " + path + ": no tokens; remove the flag to run without authentication")
	}
	return ps, nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
