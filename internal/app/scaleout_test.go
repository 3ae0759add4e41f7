package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/reconcilers"
)

// node is one probe process of a three-process cluster.
type node struct {
	name string
	args []string
	runs string // the probe's run file ("" for a NATS node)
	cmd  *exec.Cmd
	c    *api.Client
	log  *os.File
}

// start starts n's process; its URL is read by n.connect.
func (n *node) start(t *testing.T, bin string) <-chan string {
	t.Helper()
	args := n.args
	if n.runs != "" {
		args = append(slices.Clip(args), "--runs", n.runs)
	}
	n.cmd = exec.Command(bin, args...)
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stderr = n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := n.cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	url := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		url <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return url
}

func (n *node) connect(t *testing.T, url <-chan string) {
	t.Helper()
	select {
	case u := <-url:
		if u == "" {
			t.Fatalf("%s exited before serving; its log is %s", n.name, n.log.Name())
		}
		n.c = &api.Client{BaseURL: u}
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s did not start; its log is %s", n.name, n.log.Name())
	}
	eventuallyWithin(t, 3*time.Minute, n.name+" ready", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := n.c.List(ctx, api.Query{Kind: "Probe"})
		return err == nil
	})
}

// held reads how many partitions n runs from its metrics (-1 if it does
// not answer).
func (n *node) held() int {
	resp, err := http.Get(n.c.BaseURL + "/metrics")
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

func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeDocs are n Probe manifests at spec value gen, as JSON documents.
func probeDocs(from, to, gen int) []byte {
	var sb strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&sb, `{"apiVersion":"v1","kind":"Probe","metadata":{"name":"o-%d","namespace":"scale"},"spec":{"gen":%d}}`+"\n---\n", i, gen)
	}
	return []byte(sb.String())
}

// applyAll applies n objects in requests of 500, spread over clients.
func applyAll(t *testing.T, clients []*api.Client, n, gen int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n/500+1)
	sem := make(chan struct{}, len(clients))
	for i, from := 0, 0; from < n; i, from = i+1, from+500 {
		c := clients[i%len(clients)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A request can land while the cluster elects a leader; the
			// apply is idempotent, so retry it.
			var err error
			for range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err = c.Apply(ctx, "scale", probeDocs(from, min(from+500, n), gen), "")
				cancel()
				if err == nil {
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// logExcerpt logs n's lines about membership, partitions and problems
// from since on (the whole log if since is zero), at most the last 150.
func logExcerpt(t *testing.T, n *node, since time.Time) {
	t.Helper()
	data, err := os.ReadFile(n.log.Name())
	if err != nil {
		t.Logf("%s: %v", n.name, err)
		return
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(since) {
			continue
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
			strings.Contains(line, "partition") || strings.Contains(line, "instances") {
			lines = append(lines, line)
		}
	}
	if len(lines) > 150 {
		lines = lines[len(lines)-150:]
	}
	t.Logf("%s's log from %s (%d lines):\n%s", n.name, since.UTC().Format("15:04:05.000"), len(lines), strings.Join(lines, "\n"))
}

// run is one recorded run of a key.
type run struct {
	instance   string
	start, end int64 // unix nanos; end is the kill time for a killed run
	gen        string
}

// readRuns parses a probe's run file; a run left open ends at cutoff.
func readRuns(t *testing.T, path string, cutoff int64, into map[string][]run) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]run{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		at, _ := strconv.ParseInt(f[4], 10, 64)
		switch f[0] {
		case "start":
			open[f[2]] = run{instance: f[1], start: at, gen: f[3]}
		case "end", "cancel":
			// A cancelled run made no side effect after the time it
			// gives (see the probe).
			r := open[f[2]]
			delete(open, f[2])
			r.end = at
			into[f[2]] = append(into[f[2]], r)
		}
	}
	for key, r := range open {
		r.end = cutoff
		into[key] = append(into[key], r)
	}
}

// TestScaleOut runs three real jetplane processes (the probe: jetplane with
// a reconciler recording every run in files outside jetplane) on a
// three-node NATS cluster with an R3 log. 10,000 objects are applied and
// then updated; one process is killed with SIGKILL midway and later
// restarted. Every object must end Ready at its latest generation, no key
// may run on two instances at overlapping times, the dead instance's
// partitions must move to the survivors in time, and after the restart the
// partitions must spread over all three again.
func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three-process clusters and reconciles 20,000 changes in each")
	}
	bin := buildProbe(t)
	// The instances use a NATS cluster of its own processes, as a fleet
	// sharing a NATS deployment does: the kill leaves the cluster whole,
	// and the partitions move once the dead instance's heartbeats are
	// missed (3 s) and claimed: within the 10 s target.
	t.Run("outside NATS", func(t *testing.T) { scaleOut(t, bin, false, 10*time.Second) })
	// Each instance embeds one node of the cluster, so the kill takes a
	// node with it. When that node led the members bucket, the claims wait
	// for the bucket's new leader, which nats-server elects 4 to 9 s after
	// the old one died (its timeouts are not configurable): the bound is
	// 20 s here, and the test logs what it took.
	t.Run("embedded NATS", func(t *testing.T) { scaleOut(t, bin, true, 20*time.Second) })
}

func scaleOut(t *testing.T, bin string, embeddedNATS bool, bound time.Duration) {
	const objects = 10_000
	// Kept when the test fails: the logs and run files explain it.
	dir, err := os.MkdirTemp("", "jetplane-scaleout-")
	if err != nil {
		t.Fatal(err)
	}
	routePorts := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	natsArgs := func(i int) []string {
		return []string{"--nats-name", fmt.Sprintf("n%d", i+1), "--nats-cluster", "jp",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "--nats-routes", strings.Join(routes, ",")}
	}
	var natsURLs string
	if !embeddedNATS {
		var urls []string
		for i := range 3 {
			logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			n := &node{name: fmt.Sprintf("n%d", i+1), log: logf,
				args: append([]string{"--nats-only", "--data", filepath.Join(dir, fmt.Sprintf("n%d", i+1)), "--nats-port", "-1", "--nats-auth-dir", filepath.Join(dir, "auth")}, natsArgs(i)...)}
			url := n.start(t, bin)
			select {
			case u := <-url:
				if u == "" {
					t.Fatalf("NATS node %s exited; its log is %s", n.name, logf.Name())
				}
				urls = append(urls, u)
			case <-time.After(time.Minute):
				t.Fatalf("NATS node %s did not start", n.name)
			}
		}
		natsURLs = strings.Join(urls, ",")
		testenv.WaitForJetStream(t, natsURLs, filepath.Join(dir, "auth", auth.InstanceFile))
	}
	nodes := make([]*node, 3)
	for i := range nodes {
		name := fmt.Sprintf("i%d", i+1)
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		n := &node{name: name, log: logf, runs: filepath.Join(dir, name+".runs"), args: []string{
			// The API port is the kernel's pick: one chosen ahead could be taken
			// by an embedded server's random port before the API binds it.
			"--instance", name, "--listen", "127.0.0.1:0", "--replicas", "3",
		}}
		if embeddedNATS {
			n.args = append(n.args, "--data", filepath.Join(dir, name))
			n.args = append(n.args, natsArgs(i)...)
		} else {
			n.args = append(n.args, "--nats-url", natsURLs, "--nats-creds", filepath.Join(dir, "auth", auth.InstanceFile))
		}
		nodes[i] = n
	}
	var killed time.Time
	defer func() {
		if t.Failed() {
			// CI keeps only the test's output: the instances' own account
			// of membership and partitions goes there.
			for _, n := range nodes {
				logExcerpt(t, n, killed)
			}
			t.Logf("logs and run files are in %s", dir)
			return
		}
		for _, n := range nodes {
			if n.cmd.ProcessState == nil {
				_ = n.cmd.Process.Kill()
				_ = n.cmd.Wait()
			}
		}
		_ = os.RemoveAll(dir)
	}()
	began := time.Now()
	urls := make([]<-chan string, 3)
	for i, n := range nodes {
		urls[i] = n.start(t, bin)
	}
	for i, n := range nodes {
		n.connect(t, urls[i])
	}
	spread := func(ns []*node) func() bool {
		return func() bool {
			sum := 0
			for _, n := range ns {
				h := n.held()
				if h < 1 {
					return false
				}
				sum += h
			}
			return sum == 16
		}
	}
	eventuallyWithin(t, time.Minute, "partitions spread over three instances", spread(nodes))
	t.Logf("cluster up, partitions spread, in %s", time.Since(began).Round(time.Millisecond))

	clients := []*api.Client{nodes[0].c, nodes[1].c, nodes[2].c}
	applyAll(t, clients, objects, 1)
	// Kill i1 while runs are in flight.
	eventuallyWithin(t, 2*time.Minute, "runs under way", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "i2.runs"))
		return strings.Count(string(data), "\nend ") > 500
	})
	victim := nodes[0]
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	killed = time.Now()
	t.Logf("killed i1 at %s", killed.UTC().Format("15:04:05.000"))
	eventuallyWithin(t, time.Minute, "the survivors to take every partition", spread(nodes[1:]))
	takeover := time.Since(killed)
	t.Logf("survivors hold every partition %s after the kill", takeover.Round(time.Millisecond))
	if takeover > bound {
		t.Errorf("partitions moved to the survivors %s after the kill; want at most %s", takeover, bound)
	}

	applied := time.Now()
	applyAll(t, clients[1:], objects, 2)
	t.Logf("updates applied through the survivors in %s", time.Since(applied).Round(time.Millisecond))
	// The survivors alone bring every object, the dead instance's too, to
	// Ready at its latest generation: taking a partition means running it.
	var notReady int
	eventuallyWithin(t, 3*time.Minute, "the survivors to bring every object to Ready at generation 2", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := nodes[1].c.List(ctx, api.Query{Kind: "Probe"})
		if err != nil || len(list.Items) != objects {
			return false
		}
		notReady = 0
		for _, raw := range list.Items {
			o, err := api.DecodeObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reconcilers.IsReady(o) || o.Metadata.Generation != 2 || o.Status.ObservedGeneration != 2 {
				notReady++
			}
		}
		return notReady == 0
	})
	t.Logf("every object Ready at generation 2 %s after the updates began", time.Since(applied).Round(time.Millisecond))
	// Restart i1 on the same data, recording into a new file.
	victim.runs = filepath.Join(dir, "i1-restarted.runs")
	url := victim.start(t, bin)
	victim.connect(t, url)
	restarted := time.Now()
	eventuallyWithin(t, time.Minute, "partitions spread over all three after the restart", spread(nodes))
	t.Logf("partitions spread over three again %s after the restart", time.Since(restarted).Round(time.Millisecond))

	// Every status write was made by an instance that had run the key:
	// sample the histories first, then read the run files, which then
	// hold every run that started before those writes.
	type write struct {
		key, instance string
		at            int64
	}
	var writes []write
	sampled := time.Now()
	for i := 0; i < objects; i += 97 {
		k := api.Key{Kind: "Probe", Namespace: "scale", Name: fmt.Sprint("o-", i)}
		// Bounded attempts: a request is never left waiting for ever.
		var h *api.HistoryResponse
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			h, err = nodes[2].c.History(ctx, k)
			cancel()
			if err == nil {
				break
			}
			if attempt == 3 {
				t.Fatalf("history of %s: %v", k.Name, err)
			}
		}
		for _, raw := range h.Events {
			ev, err := api.DecodeEvent(raw)
			if err != nil {
				t.Fatal(err)
			}
			if inst, ok := strings.CutPrefix(ev.Actor, "reconciler/Probe@"); ok {
				writes = append(writes, write{key: "scale/" + k.Name, instance: inst, at: ev.Time.AsTime().UnixNano()})
			}
		}
	}
	t.Logf("histories sampled in %s", time.Since(sampled).Round(time.Millisecond))

	// No key ran on two instances at overlapping times. A run the kill cut
	// short counts as running until the kill.
	runs := map[string][]run{}
	readRuns(t, filepath.Join(dir, "i1.runs"), killed.UnixNano(), runs)
	for _, name := range []string{"i2.runs", "i3.runs", "i1-restarted.runs"} {
		readRuns(t, filepath.Join(dir, name), time.Now().UnixNano(), runs)
	}
	if len(runs) != objects {
		t.Fatalf("%d keys ran, want %d", len(runs), objects)
	}
	total, moved := 0, 0
	for key, rs := range runs {
		total += len(rs)
		slices.SortFunc(rs, func(a, b run) int { return int(a.start - b.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].instance != rs[i-1].instance {
				moved++
			}
			for j := range i {
				if rs[j].instance != rs[i].instance && rs[j].end > rs[i].start {
					t.Errorf("%s ran on %s from %d to %d and on %s from %d", key, rs[j].instance, rs[j].start, rs[j].end, rs[i].instance, rs[i].start)
				}
			}
		}
		if last := rs[len(rs)-1]; last.gen != "2" {
			t.Errorf("%s: last run at generation %s, want 2", key, last.gen)
		}
	}
	perInstance := map[string]int{}
	for _, rs := range runs {
		for _, r := range rs {
			perInstance[r.instance]++
		}
	}
	t.Logf("%d runs of %d keys (by instance: %v); %d times a key's next run was on another instance", total, objects, perInstance, moved)

	for _, w := range writes {
		if !slices.ContainsFunc(runs[w.key], func(r run) bool { return r.instance == w.instance && r.start <= w.at }) {
			t.Errorf("%s: status written by %s at %d without a run of it there", w.key, w.instance, w.at)
		}
	}
}
