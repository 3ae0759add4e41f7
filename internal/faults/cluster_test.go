package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/testenv"
)

// proc is one jetplane process (the probe: jetplane serve with a Probe
// reconciler that records its runs in a file outside jetplane).
type proc struct {
	mu      sync.Mutex // guards cmd, exited, c and url: the load reads them while a fault restarts p
	name    string
	args    []string
	dir     string // where its run files and log go
	data    string // its data directory, when not <cluster dir>/<name>
	starts  int
	cmd     *exec.Cmd
	c       *api.Client
	url     string
	runs    []string // run files, one per start
	stopped []time.Time
	exited  chan struct{}
	// natsName and natsURL name its embedded NATS node.
	natsName, natsURL string
}

// start starts the process, recording its runs into a new file, and
// returns once it serves its API (it may not be ready yet).
func (p *proc) start(t *testing.T, bin string) {
	t.Helper()
	p.starts++
	runs := filepath.Join(p.dir, fmt.Sprintf("%s.%d.runs", p.name, p.starts))
	p.runs = append(p.runs, runs)
	logf, err := os.OpenFile(filepath.Join(p.dir, p.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(p.args, "--runs", runs)...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	url := strings.TrimSpace(line)
	if url == "" {
		t.Fatalf("%s exited before serving; its log is %s", p.name, logf.Name())
	}
	p.mu.Lock()
	p.url, p.c = url, &api.Client{BaseURL: url}
	p.mu.Unlock()
}

// client is the API client of p's latest start.
func (p *proc) client() *api.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// process is p's latest process and the channel closed when it exits.
func (p *proc) process() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// signal sends sig and, for SIGKILL and SIGTERM, waits for the exit.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	cmd, exited := p.process()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Fatalf("%s did not exit within a minute of %s", p.name, sig)
		}
		p.stopped = append(p.stopped, time.Now())
	}
}

func (p *proc) alive() bool {
	cmd, exited := p.process()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// held reads how many partitions p runs from its metrics (-1 if it does
// not answer).
func (p *proc) held() int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(p.client().BaseURL + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "jetplane_reconcile_partitions_held "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return -1
}

// cluster is three jetplane processes, each embedding one node of a
// three-node NATS cluster, with the log at three replicas: the cluster of
// jetplane serve processes the README describes, with no other software.
type cluster struct {
	t     *testing.T
	bin   string
	dir   string
	procs []*proc
	// replicas is the log's replication (3; 1 for a single process).
	replicas int
}

func buildProbe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	if out, err := exec.Command("go", "build", "-o", bin, "../testenv/probe").CombinedOutput(); err != nil {
		t.Fatalf("go build probe: %v\n%s", err, out)
	}
	return bin
}

func startCluster(t *testing.T, bin, dir string, sleep time.Duration) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: dir, replicas: 3}
	routePorts := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range 3 {
		name := fmt.Sprintf("i%d", i+1)
		natsPort := testenv.FreePort(t)
		c.procs = append(c.procs, &proc{name: name, dir: dir, natsName: fmt.Sprintf("n%d", i+1), natsURL: fmt.Sprintf("nats://127.0.0.1:%d", natsPort), args: []string{
			"--nats-port", strconv.Itoa(natsPort),
			"--instance", name, "--listen", "127.0.0.1:0", // the URL comes from the probe's first line
			"--replicas", "3", "--data", filepath.Join(dir, name), "--sleep", sleep.String(),
			"--nats-name", fmt.Sprintf("n%d", i+1), "--nats-cluster", "jp",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "--nats-routes", strings.Join(routes, ","),
		}})
	}
	c.startAll()
	return c
}

// startAll starts every process that is not running, at once (a cluster
// needs a quorum to answer), and waits for the partitions to spread.
func (c *cluster) startAll() {
	c.t.Helper()
	done := make(chan struct{}, len(c.procs))
	n := 0
	for _, p := range c.procs {
		if p.alive() {
			continue
		}
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			p.start(c.t, c.bin)
		}()
	}
	for range n {
		<-done
	}
	c.waitSpread(3 * time.Minute)
}

// waitSpread waits until every live process holds at least one partition
// and together they hold all 16.
func (c *cluster) waitSpread(d time.Duration) time.Duration {
	c.t.Helper()
	began := time.Now()
	eventually(c.t, d, "partitions spread over the live instances", func() bool {
		sum := 0
		for _, p := range c.procs {
			if !p.alive() {
				continue
			}
			h := p.held()
			if h < 1 {
				return false
			}
			sum += h
		}
		return sum == 16
	})
	return time.Since(began)
}

func (c *cluster) clients() []*api.Client {
	var out []*api.Client
	for _, p := range c.procs {
		if cl := p.client(); cl != nil {
			out = append(out, cl)
		}
	}
	return out
}

// streamLeader is the process whose NATS node leads the log's stream,
// asked of the live nodes' client ports directly.
func (c *cluster) streamLeader() *proc {
	c.t.Helper()
	var leader *proc
	eventually(c.t, time.Minute, "the log to have a leader", func() bool {
		nc, err := c.connect()
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, events.StreamName)
		if err != nil || s.CachedInfo().Cluster == nil {
			return false
		}
		for _, p := range c.procs {
			if p.natsName == s.CachedInfo().Cluster.Leader && p.alive() {
				leader = p
				return true
			}
		}
		return false
	})
	return leader
}

// connect connects to the NATS node of a live process, with that
// process's own instance credentials (each keeps its store in its data
// directory; the embedded server admits nobody without credentials).
func (c *cluster) connect() (*nats.Conn, error) {
	err := errors.New("no process is alive")
	for _, p := range c.procs {
		if !p.alive() {
			continue
		}
		var opts []nats.Option
		data := p.data
		if data == "" {
			data = filepath.Join(c.dir, p.name)
		}
		if opts, err = events.CredsOptions(filepath.Join(data, "auth", auth.InstanceFile)); err != nil {
			continue
		}
		var nc *nats.Conn
		if nc, err = nats.Connect(p.natsURL, append(opts, nats.Timeout(2*time.Second))...); err == nil {
			return nc, nil
		}
	}
	return nil, err
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) exitedCh() chan struct{} {
	_, exited := p.process()
	return exited
}
