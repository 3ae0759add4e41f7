package faults_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

var (
	all    = flag.Bool("faults.all", false, "run every fault (scripts/faults); without it, only the SIGKILL of an instance")
	report = flag.String("faults.report", "", "also write the results table to this file")
)

// fault is one thing done to the cluster under load. inject does it and
// returns heal (nil when there is nothing to undo beyond a restart), which
// runs after the fault's time is measured.
type fault struct {
	name   string
	inject func(t *testing.T, c *cluster) (heal func())
	// measureAfterHeal counts recovery from heal's start, for a fault
	// during which nothing can take changes.
	measureAfterHeal bool
}

// faultRow is one line of the results.
type faultRow struct {
	name                        string
	acked, lost, unconv, overlp int
	failedApplies               int
	outage                      time.Duration // longest stretch of failed applies
	recovered                   time.Duration // fault → a new change applied and reconciled
	spread                      time.Duration // heal → partitions spread over all three again
	converged                   time.Duration // load stopped → every object converged
	errs                        string
}

func faultsToRun() []fault {
	kill := fault{name: "SIGKILL of an instance (not the log's leader)", inject: func(t *testing.T, c *cluster) func() {
		p := c.follower()
		p.signal(t, syscall.SIGKILL)
		return func() { p.start(t, c.bin) }
	}}
	if !*all {
		return []fault{kill}
	}
	return []fault{
		kill,
		{name: "SIGSTOP of one node (not the log's leader) for 30 s, then SIGCONT", inject: func(t *testing.T, c *cluster) func() {
			p := c.follower()
			p.signal(t, syscall.SIGSTOP)
			stopped := time.Now()
			return func() {
				time.Sleep(time.Until(stopped.Add(30 * time.Second)))
				p.signal(t, syscall.SIGCONT)
			}
		}},
		{name: "SIGKILL of the log's leader node", inject: func(t *testing.T, c *cluster) func() {
			p := c.streamLeader()
			p.signal(t, syscall.SIGKILL)
			return func() { p.start(t, c.bin) }
		}},
		{name: "whole cluster stopped (SIGTERM) and started", measureAfterHeal: true, inject: func(t *testing.T, c *cluster) func() {
			for _, p := range c.procs {
				cmd, _ := p.process()
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			for _, p := range c.procs {
				select {
				case <-p.exitedCh():
				case <-time.After(time.Minute):
					t.Fatalf("%s did not stop within a minute of SIGTERM", p.name)
				}
				p.stopped = append(p.stopped, time.Now())
			}
			return func() { c.startAll() }
		}},
	}
}

// follower is a live process whose node does not lead the log.
func (c *cluster) follower() *proc {
	leader := c.streamLeader()
	for _, p := range c.procs {
		if p != leader && p.alive() {
			return p
		}
	}
	c.t.Fatal("no live follower")
	return nil
}

// TestFaults runs a three-process jetplane cluster (each process embeds one
// NATS node; the log is at three replicas) under a steady load of applies
// and reconciles, and does faults to it one after the other. After each
// it stops the load and checks: no acknowledged change is missing from the
// log, every object converges to its last acknowledged change, and no key
// ran on two instances at once (from the runs the probe recorded outside
// jetplane). It states how long each fault took to recover from.
//
// By default it runs one fault (SIGKILL of an instance), within about a
// minute; scripts/faults runs them all (-faults.all) and the disk-full
// fault (TestDiskFull).
func TestFaults(t *testing.T) {
	bin := buildProbe(t)
	dir, err := os.MkdirTemp("", "jetplane-faults-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() || *all {
			t.Logf("logs and run files are in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	began := time.Now()
	c := startCluster(t, bin, dir, 2*time.Millisecond)
	t.Logf("cluster of three up, partitions spread, in %s", time.Since(began).Round(time.Millisecond))
	l := &load{acked: map[string][]int{}, tried: map[string]int{}, failed: map[string][]int{}, firstErr: map[string]int{}}
	l.clients = func() []*api.Client {
		var out []*api.Client
		for _, p := range c.procs {
			if p.alive() {
				out = append(out, p.client())
			}
		}
		if len(out) == 0 {
			return c.clients()
		}
		return out
	}
	var rows []faultRow
	seenOverlap := map[string]bool{}
	for _, f := range faultsToRun() {
		t.Logf("fault: %s", f.name)
		before := l.ackedCount()
		l.resume(4)
		time.Sleep(5 * time.Second) // steady load first
		at := time.Now()
		heal := f.inject(t, c)
		t.Logf("  injected at %s", at.UTC().Format("15:04:05.000"))
		row := faultRow{name: f.name}
		if f.measureAfterHeal {
			// Nothing takes changes until heal (the whole cluster was
			// stopped): recovery counts from heal's start.
			healing := time.Now()
			heal()
			row.recovered = recovery(t, c, healing)
		} else {
			// The survivors must take changes, and run the keys of the
			// partitions they take over, while the fault lasts; then a
			// killed process is restarted, a paused one let go on.
			row.recovered = recovery(t, c, at)
			heal()
		}
		row.spread = c.waitSpread(3 * time.Minute)
		time.Sleep(5 * time.Second) // load goes on after the cluster is whole
		l.halt()
		b, e, failed := l.outage(at)
		row.outage, row.failedApplies = e.Sub(b), failed
		v := check(t, c, l, 3*time.Minute)
		row.acked, row.lost, row.unconv, row.converged = l.ackedCount()-before, v.lost, v.unconverged, v.converged
		// Runs overlapping since the previous fault's check.
		for _, o := range v.overlaps {
			if !seenOverlap[o] {
				seenOverlap[o] = true
				row.overlp++
				if row.overlp <= 5 {
					t.Errorf("%s: %s", f.name, o)
				}
			}
		}
		row.errs = l.errors()
		l.firstErr = map[string]int{}
		rows = append(rows, row)
		t.Logf("  acked %d, lost %d, unconverged %d, overlapping runs %d; applies failed %d (longest outage %s); recovered %s after the fault; spread again %s after heal; converged %s after the load stopped",
			row.acked, row.lost, row.unconv, row.overlp, row.failedApplies, row.outage.Round(time.Millisecond), row.recovered.Round(time.Millisecond), row.spread.Round(time.Millisecond), row.converged.Round(time.Millisecond))
		if row.errs != "" {
			t.Logf("  apply errors: %s", row.errs)
		}
	}
	if *all {
		t.Logf("fault: disk full")
		d := diskFull(t, bin, dir)
		if d.resumedWithoutRestart {
			d.name += "; resumed without a restart"
		} else {
			d.name += fmt.Sprintf("; did not resume within 20 s without a restart; recovered %s after a restart", d.restartRecovered.Round(100*time.Millisecond))
		}
		rows = append(rows, d.faultRow)
	}
	writeReport(t, rows)
	for _, r := range rows {
		if r.errs != "" {
			t.Logf("apply errors during %q: %s", r.name, r.errs)
		}
	}
}

// recovery applies new changes to sentinel objects, one in each of the
// log's 16 partitions, again and again until every partition has
// reconciled one of them Ready, and returns how long after from that was:
// the partitions the fault moved as well as the others.
func recovery(t *testing.T, c *cluster, from time.Time) time.Duration {
	t.Helper()
	d, ok := recoveryWithin(c, from, 3*time.Minute)
	if !ok {
		t.Fatalf("not every partition applied and reconciled a change within 3 minutes of %s", from.UTC().Format("15:04:05.000"))
	}
	return d
}

// sentinels are object names, one in each of the 16 partitions.
var sentinels = func() []string {
	byPartition := map[int]string{}
	for i := 0; len(byPartition) < 16; i++ {
		name := fmt.Sprint("sentinel-", i)
		p := events.Partition(&schemas.ObjectKey{Kind: "Probe", Namespace: namespace, Name: name}, 16)
		if _, ok := byPartition[p]; !ok {
			byPartition[p] = name
		}
	}
	out := make([]string, 0, 16)
	for p := range 16 {
		out = append(out, byPartition[p])
	}
	return out
}()

// recoveryWithin is recovery giving up after budget. Its requests go first
// to the process that answered the last one, each with a short timeout: a
// paused process takes connections and never answers, and waiting on it
// would count in the time to recover.
func recoveryWithin(c *cluster, from time.Time, budget time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(budget)
	done := map[string]bool{}
	said := false
	good := 0
	ask := func(timeout time.Duration, fn func(ctx context.Context, cl *api.Client) error) error {
		err := errors.New("no process is running")
		for i := range c.procs {
			j := (good + i) % len(c.procs)
			p := c.procs[j]
			if !p.alive() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err = fn(ctx, p.client())
			cancel()
			if err == nil {
				good = j
				return nil
			}
		}
		return err
	}
	for gen := 1; time.Now().Before(deadline); gen++ {
		if !said && time.Since(from) > 30*time.Second {
			said = true
			var pending []string
			for p, name := range sentinels {
				if !done[name] {
					pending = append(pending, fmt.Sprintf("%s (partition %d)", name, p))
				}
			}
			c.t.Logf("  %s after the fault, not yet reconciled: %s", time.Since(from).Round(time.Second), strings.Join(pending, ", "))
		}
		var sb strings.Builder
		for _, name := range sentinels {
			if !done[name] {
				fmt.Fprintf(&sb, `{"apiVersion":"v1","kind":"Probe","metadata":{"name":%q,"namespace":%q},"spec":{"n":%d,"at":%q}}`+"\n---\n",
					name, namespace, gen, time.Now().Format(time.RFC3339Nano))
			}
		}
		err := ask(3*time.Second, func(ctx context.Context, cl *api.Client) error {
			_, err := cl.Apply(ctx, "faults", []byte(sb.String()), "")
			return err
		})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		waitUntil := time.Now().Add(3 * time.Second)
		for time.Now().Before(waitUntil) {
			_ = ask(time.Second, func(ctx context.Context, cl *api.Client) error {
				list, err := cl.List(ctx, api.Query{Kind: "Probe", Namespace: namespace})
				if err != nil {
					return err
				}
				for _, raw := range list.Items {
					o, err := api.DecodeObject(raw)
					if err != nil || !strings.HasPrefix(o.Metadata.Name, "sentinel-") {
						continue
					}
					if int(o.Spec.GetFields()["n"].GetNumberValue()) == gen && reconcilers.IsReady(o) && o.Status.ObservedGeneration == o.Metadata.Generation {
						done[o.Metadata.Name] = true
					}
				}
				return nil
			})
			if len(done) == len(sentinels) {
				return time.Since(from), true
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return 0, false
}

func writeReport(t *testing.T, rows []faultRow) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("| fault | changes acked | acked lost (all so far) | objects not converged | overlapping runs | applies failed (longest outage) | recovered (from the fault; whole cluster: from the restart) | partitions spread after heal | converged after load stopped |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %d | %d (%s) | %s | %s | %s |\n", r.name, r.acked, r.lost, r.unconv, r.overlp,
			r.failedApplies, r.outage.Round(100*time.Millisecond), r.recovered.Round(100*time.Millisecond), r.spread.Round(100*time.Millisecond), r.converged.Round(100*time.Millisecond))
	}
	t.Logf("results:\n%s", sb.String())
	if *report != "" {
		if err := os.WriteFile(*report, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
