package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/reconcilers/pod"
)

// agentFlags are the node agent's settings, shared by `jetplane node` and
// `jetplane serve` (which prefixes them with node-).
type agentFlags struct {
	name, dir, cpu, memory string
	defaultMemory          string
	maxVolume, maxLog      string
	labels, taints, roots  []string
	pods                   int
	maxImage               int64
	heartbeat              time.Duration
	clockScale             float64
}

func (a *agentFlags) register(f *pflag.FlagSet, prefix string) {
	host, _ := os.Hostname()
	name, usage := strings.ToLower(host), "the node's name (a DNS-1123 subdomain)"
	if prefix != "" {
		name, usage = "", `the local node's name (default "local" with the embedded NATS server, the host name with --nats-url)`
	}
	f.StringVar(&a.name, prefix+"name", name, usage)
	f.StringVar(&a.dir, prefix+"dir", "", "the node's own directory: image and compilation caches, emptyDir volumes (serve: <data>-node; keep it outside the data directory)")
	f.StringSliceVar(&a.labels, prefix+"labels", nil, "the Node's labels, KEY=VALUE, comma-separated")
	f.StringSliceVar(&a.taints, prefix+"taints", nil, "the Node's taints, KEY[=VALUE]:EFFECT, comma-separated")
	f.StringVar(&a.cpu, prefix+"cpu", "", "CPU capacity (default: the machine's cores)")
	f.StringVar(&a.memory, prefix+"memory", "", "memory capacity, such as 8Gi (default: the machine's memory)")
	f.IntVar(&a.pods, prefix+"pods", 1000, "most pods the node runs")
	f.StringSliceVar(&a.roots, "host-path-root", nil, "host directory hostPath volumes may be in (repeatable); none allows no hostPath")
	f.Int64Var(&a.maxImage, prefix+"max-image-bytes", events.DefaultMaxImageBytes, "largest module the node pulls")
	f.StringVar(&a.defaultMemory, prefix+"default-memory-limit", "256Mi", "memory limit of a container that sets none")
	f.StringVar(&a.maxVolume, prefix+"max-volume-bytes", "1Gi", "most bytes one pod's emptyDir volumes hold together")
	f.StringVar(&a.maxLog, prefix+"max-log-bytes", "16Mi", "most output one container start publishes; the rest is dropped")
	f.DurationVar(&a.heartbeat, prefix+"heartbeat", 10*time.Second, "how often the node reports")
	f.Float64Var(&a.clockScale, prefix+"clock-scale", 1, "run backoffs and deadlines this many times faster (tests and demos)")
	_ = f.MarkHidden(prefix + "clock-scale")
}

func (a *agentFlags) config() (pod.AgentConfig, error) {
	cfg := pod.AgentConfig{Node: a.name, Dir: a.dir, Pods: a.pods, HostPathRoots: a.roots, MaxImageBytes: a.maxImage, Heartbeat: a.heartbeat, Labels: map[string]string{}}
	for _, l := range a.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("label %q: want KEY=VALUE", l)
		}
		cfg.Labels[k] = v
	}
	for _, t := range a.taints {
		kv, effect, ok := strings.Cut(t, ":")
		k, v, _ := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT", t)
		}
		cfg.Taints = append(cfg.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	for _, q := range []struct {
		flag, v string
		into    *int64
	}{{"default-memory-limit", a.defaultMemory, &cfg.DefaultMemoryLimit}, {"max-volume-bytes", a.maxVolume, &cfg.MaxVolumeBytes}, {"max-log-bytes", a.maxLog, &cfg.MaxLogBytes}} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil || v.Value() <= 0 {
			return cfg, fmt.Errorf("--%s: %q is not a positive quantity such as 256Mi", q.flag, q.v)
		}
		*q.into = v.Value()
	}
	for _, q := range []struct {
		flag, v string
		into    *resource.Quantity
	}{{"cpu", a.cpu, &cfg.CPU}, {"memory", a.memory, &cfg.Memory}} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil {
			return cfg, fmt.Errorf("--%s: %q is not a quantity such as 4 or 8Gi", q.flag, q.v)
		}
		*q.into = v
	}
	if a.clockScale != 1 {
		if a.clockScale <= 0 {
			return cfg, fmt.Errorf("clock scale %v: must be positive", a.clockScale)
		}
		cfg.Clock = pod.ScaledClock(a.clockScale)
	}
	return cfg, nil
}

// serveNodeFlags are serve's node settings: the local agent, and how
// instances judge nodes.
type serveNodeFlags struct {
	enabled           bool
	agent             agentFlags
	grace, eviction   time.Duration
	maxImagePushBytes int64
}

func (s *serveNodeFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&s.enabled, "node", true, "run a node agent in this process, so one process is a complete install")
	s.agent.register(f, "node-")
	f.DurationVar(&s.grace, "node-grace", 40*time.Second, "a node whose heartbeat is missing this long is NotReady")
	f.DurationVar(&s.eviction, "node-eviction", 5*time.Minute, "pods of a node NotReady this long fail with reason NodeLost and are deleted")
	f.Int64Var(&s.maxImagePushBytes, "max-image-bytes", events.DefaultMaxImageBytes, "largest module `jetplane image push` accepts")
}

func (s *serveNodeFlags) apply(cfg *app.Config) error {
	cfg.Pods.NodeGrace, cfg.Pods.NodeEviction, cfg.Pods.MaxImageBytes = s.grace, s.eviction, s.maxImagePushBytes
	if !s.enabled {
		return nil
	}
	if s.agent.name == "" {
		// One process is a complete install: its node is "local". In a
		// fleet sharing NATS, each machine's node is named after it.
		s.agent.name = "local"
		if cfg.NATS.URLs != "" {
			host, _ := os.Hostname()
			s.agent.name = strings.ToLower(host)
		}
	}
	ac, err := s.agent.config()
	if err != nil {
		return fmt.Errorf("--node-*: %w", err)
	}
	if cfg.NATS.URLs == "" && ac.Dir == "" {
		ac.Dir = app.NodeDir(cfg.DataDir)
	}
	if ac.Dir == "" {
		return fmt.Errorf("--node-dir: required with --nats-url (or --node=false)")
	}
	cfg.Pods.Agent = ac
	return nil
}

func newNode() *cobra.Command {
	var (
		af   agentFlags
		nats events.ConnectOptions
	)
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node agent: register a Node and run the pods bound to it",
		Long: `Run a node agent, jetplane's kubelet: it registers a Node (capacity, labels,
taints) through heartbeats, and runs the pods bound to it as WebAssembly
(WASI) modules, reporting every state of every pod. It speaks only to
NATS, on its node's own subjects and keys; it never reads the log.`,
		Example: `  jetplane node --name edge-1 --nats-url nats://10.0.0.5:4222 --nats-creds edge-1.creds
  jetplane node --name n2 --labels zone=b --taints gpu=true:NoSchedule --dir /var/lib/jetplane-node`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			cfg, err := af.config()
			if err != nil {
				return err
			}
			if cfg.Dir == "" {
				cfg.Dir = filepath.Join(".", "node-"+cfg.Node)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			nc, err := events.Connect(nats)
			if err != nil {
				return nodeConnectError(err, nats.CredsFile, cfg.Node)
			}
			defer nc.Close()
			octx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if cfg.Conn, err = events.OpenNode(octx, nc, cfg.Node); err != nil {
				return err
			}
			cfg.Logger = slog.Default()
			ag, err := pod.NewAgent(cfg)
			if err != nil {
				return err
			}
			cfg.Logger.Info("node agent started", "node", cfg.Node, "dir", cfg.Dir)
			if err := ag.Start(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&nats.URLs, "nats-url", "nats://127.0.0.1:4222", "NATS servers (comma-separated)")
	f.StringVar(&nats.CredsFile, "nats-creds", "", "NATS credentials file (the node role's)")
	f.StringVar(&nats.CAFile, "nats-ca", "", "CA certificate to trust for NATS TLS")
	f.StringVar(&nats.CertFile, "nats-cert", "", "client certificate for NATS TLS")
	f.StringVar(&nats.KeyFile, "nats-key", "", "client key for NATS TLS")
	af.register(f, "")
	cmd.Flags().SortFlags = false
	return cmd
}

// nodeConnectError says what to do when NATS refuses a node agent: a bare
// "Authorization Violation" does not say that the agent needs the node
// role's credential, or how to get one.
func nodeConnectError(err error, creds, node string) error {
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		return err
	}
	if creds == "" {
		return fmt.Errorf("%w: a node agent needs the node role's credential; where jetplane serve keeps its data, run 'jetplane creds create --role node %s -o %s.creds' and pass --nats-creds %s.creds", err, node, node, node)
	}
	return fmt.Errorf("%w: %s is not admitted (revoked, or from another server's store); run 'jetplane creds create --role node %s' where jetplane serve keeps its data", err, creds, node)
}

func newImage(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Push, list and remove WebAssembly images",
		Example: `  GOOS=wasip1 GOARCH=wasm go build -o hello.wasm ./deploy/examples/wasm/hello
  jetplane image push hello.wasm hello:v1
  jetplane image ls
  jetplane image rm hello:v1`}
	push := &cobra.Command{
		Use:   "push FILE.wasm NAME:TAG",
		Short: "Store a module in the image store (once per content; the tag points at it)",
		Example: `  jetplane image push hello.wasm hello:v1
  jetplane image push -q app.wasm app:2026-11-27`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			var r io.Reader = f
			quiet, _ := cmd.Flags().GetBool("quiet")
			// A bar redrawn with \r only reads on a terminal; in a CI log
			// every frame would be a line of its own.
			if !quiet && st.Size() > 1<<20 && isTerminal(cmd.OutOrStdout()) && isTerminal(cmd.ErrOrStderr()) {
				r = &progress{r: f, total: st.Size(), w: cmd.ErrOrStderr()}
			}
			im, err := g.client().PushImage(cmd.Context(), args[1], r, st.Size())
			if p, ok := r.(*progress); ok {
				p.done()
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%d bytes)\n", im.Ref, im.Digest, im.Size)
			return nil
		},
	}
	push.Flags().BoolP("quiet", "q", false, "no progress bar (there is none unless stdout and stderr are terminals)")
	ls := &cobra.Command{
		Use: "ls", Short: "List image tags", Args: cobra.NoArgs,
		Example: `  jetplane image ls`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().Images(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE\tPUSHED")
			for _, im := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", im.Ref, im.Digest[:min(len(im.Digest), 19)], im.Size, im.Time.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use: "rm NAME:TAG", Short: "Remove a tag (refused while a pod uses the image)", Args: cobra.ExactArgs(1),
		Example: `  jetplane image rm hello:v1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().RemoveImage(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s removed\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(push, ls, rm)
	return cmd
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a bar on w as r is read.
type progress struct {
	r     io.Reader
	w     io.Writer
	total int64
	n     int64
	last  int
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if pct := int(p.n * 100 / max(p.total, 1)); pct != p.last {
		p.last = pct
		fmt.Fprintf(p.w, "\r[%-40s] %3d%% %d/%d bytes", strings.Repeat("=", pct*40/100), pct, p.n, p.total)
	}
	return n, err
}

func (p *progress) done() { fmt.Fprintln(p.w) }

func newLogs(g *globals) *cobra.Command {
	var o api.LogsOptions
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a pod's output (stdout and stderr), like kubectl logs",
		Example: `  jetplane logs hello
  jetplane logs -f web -c main -n shop
  jetplane logs crashy --previous
  jetplane logs web --since 10m --tail 20`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Pod = args[0]
			if ns, name, ok := strings.Cut(args[0], "/"); ok {
				o.Namespace, o.Pod = ns, name
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return g.client().Logs(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Namespace, "namespace", "n", "default", "the pod's namespace")
	f.StringVarP(&o.Container, "container", "c", "", "one container (default: all)")
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new output")
	f.BoolVarP(&o.Previous, "previous", "p", false, "the output of the run before the current one")
	f.DurationVar(&o.Since, "since", 0, "only output newer than this, such as 10m")
	f.IntVar(&o.Tail, "tail", -1, "only the last N lines")
	return cmd
}
