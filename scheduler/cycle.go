package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Decision is what one cycle decided and why: the node (empty when none
// fits), the nodes looked at, each rejection reason with how many nodes it
// ruled out, and the best scores per plugin. It is what a Bound event
// records (see Record) and what a replay compares.
type Decision struct {
	Pod     string
	Profile string
	Node    string
	// SnapshotSequence is the projection sequence the snapshot reflected;
	// StartIndex the node index where filtering began (kube-scheduler
	// rotates it from pod to pod), NextStartIndex where the next cycle
	// begins.
	SnapshotSequence uint64
	StartIndex       int
	NextStartIndex   int
	// NumNodes is the snapshot's size, Evaluated how many nodes were
	// filtered, Feasible how many passed.
	NumNodes  int
	Evaluated int
	Feasible  int
	// Rejections counts nodes by rejection reason; RejectedBy by plugin.
	Rejections map[string]int
	RejectedBy map[string]int
	// Scores are each score plugin's best nodes (weighted, normalized), and
	// Totals the best sums; at most TopScores each.
	Scores []PluginScores
	Totals []NodeScore
	// Versions are the profile's plugins and their versions.
	Versions map[string]string
	// Nominated is a node a PostFilter plugin named.
	Nominated string
	// Status says why Node is empty: Unschedulable (with Message), or
	// Error when a plugin failed.
	Status *Status
}

// PluginScores is one score plugin's top nodes.
type PluginScores struct {
	Plugin string
	Weight int64
	Top    []NodeScore
}

// TopScores is how many nodes a decision keeps per plugin.
const TopScores = 3

// Message is the Kubernetes-style explanation of an unschedulable pod:
// "0/1000 nodes are available: 400 Insufficient memory, 600 node(s) had
// untolerated taint {dedicated: gpu}."
func (d *Decision) Message() string {
	if d.Status != nil && d.Status.Code == Error {
		return "running " + d.Status.Plugin + ": " + d.Status.Message()
	}
	if d.Node != "" {
		return ""
	}
	return FitMessage(d.NumNodes, d.Rejections)
}

// FitMessage formats rejection counts as kube-scheduler does: each
// "<count> <reason>", sorted as strings.
func FitMessage(numNodes int, rejections map[string]int) string {
	msg := fmt.Sprintf("0/%d nodes are available", numNodes)
	if len(rejections) > 0 {
		msg += ": " + RejectionSummary(rejections)
	}
	return msg + "."
}

// RejectionSummary is "<count> <reason>" for each reason, sorted as
// strings and joined with commas.
func RejectionSummary(rejections map[string]int) string {
	parts := make([]string, 0, len(rejections))
	for reason, n := range rejections {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Cycle runs one scheduling cycle for pod over state.Snapshot with profile
// p, filtering from node index start. It reads nothing else: the same
// inputs give the same decision (plugins are expected to be deterministic,
// and ties between equal scores are broken by a hash of pod and node).
func Cycle(ctx context.Context, p *Profile, state *CycleState, pod *PodInfo, start int) *Decision {
	snap := state.Snapshot
	d := &Decision{Pod: pod.Key, Profile: p.Name, SnapshotSequence: snap.Sequence, NumNodes: snap.Len(),
		Rejections: map[string]int{}, RejectedBy: map[string]int{}, Versions: p.Versions()}
	if n := snap.Len(); n > 0 {
		start %= n
	} else {
		start = 0
	}
	d.StartIndex, d.NextStartIndex = start, start

	var allowed map[string]bool // nil: every node
	var narrowedBy []string
	for _, pl := range p.PreFilter {
		var st *Status
		if rp, ok := pl.(PreFilterResultPlugin); ok {
			var names []string
			names, st = rp.PreFilterResult(ctx, state, pod)
			if st.IsSuccess() && names != nil {
				next := make(map[string]bool, len(names))
				for _, n := range names {
					if allowed == nil || allowed[n] {
						next[n] = true
					}
				}
				allowed = next
				narrowedBy = append(narrowedBy, pl.Name())
			}
		} else {
			st = pl.PreFilter(ctx, state, pod)
		}
		switch {
		case st.IsSuccess():
		case st.IsSkip():
			state.skipFilter[pl.Name()] = true
		case st.IsRejected():
			st.Plugin = pl.Name()
			for _, r := range st.Reasons {
				d.Rejections[r] += snap.Len()
			}
			d.RejectedBy[pl.Name()] += snap.Len()
			d.Status = st
			return d
		default:
			st.Plugin = pl.Name()
			d.Status = st
			return d
		}
	}
	if snap.Len() == 0 {
		d.Status = NewStatus(Unschedulable, "no nodes available to schedule pods")
		return d
	}

	var nodes nodeList = snap
	if allowed != nil {
		// As kube-scheduler: only the named nodes are evaluated; the others
		// count as rejected by the plugins that narrowed the set.
		reason := fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", narrowedBy)
		named := make(nodeSlice, 0, len(allowed))
		for i := range snap.Len() {
			if n := snap.At(i); allowed[n.Name()] {
				named = append(named, n)
			}
		}
		nodes = named
		if out := snap.Len() - nodes.Len(); out > 0 {
			d.Rejections[reason] += out
			for _, n := range narrowedBy {
				d.RejectedBy[n] += out
			}
		}
		if nodes.Len() == 0 {
			d.Status = NewStatus(UnschedulableAndUnresolvable, FitMessage(d.NumNodes, d.Rejections))
			return d
		}
		d.StartIndex, d.NextStartIndex = start%nodes.Len(), start%nodes.Len()
	}
	feasible, rejected, errSt := filter(ctx, p, state, pod, d, nodes)
	if errSt != nil {
		d.Status = errSt
		return d
	}
	d.Feasible = len(feasible)
	if len(feasible) == 0 {
		for _, pl := range p.PostFilter {
			node, st := pl.PostFilter(ctx, state, pod, rejected)
			if st.IsSuccess() && node != "" {
				d.Nominated = node
				break
			}
		}
		d.Status = NewStatus(Unschedulable, FitMessage(d.NumNodes, d.Rejections))
		return d
	}
	if len(feasible) == 1 {
		d.Node = feasible[0].Name()
		d.Totals = []NodeScore{{Name: d.Node}}
		return d
	}
	if st := score(ctx, p, state, pod, feasible, d); st != nil {
		d.Status = st
		return d
	}
	return d
}

// filter runs the Filter plugins over nodes from d.StartIndex in blocks,
// in parallel within a block, until enough feasible nodes are found. Which
// nodes count does not depend on goroutine timing: the feasible nodes are
// taken in node order, and the block's surplus is dropped.
func filter(ctx context.Context, p *Profile, state *CycleState, pod *PodInfo, d *Decision, nodes nodeList) ([]*NodeInfo, map[string]*Status, *Status) {
	n := nodes.Len()
	want := p.numFeasibleNodesToFind(n)
	block := max(want, 64)
	// statuses grows a block at a time: a cycle usually stops after the
	// first, long before the snapshot's end. (Only the statuses it holds
	// outlive the cycle, in rejected.)
	statuses := scratchStatuses.Get(min(block, n))[:0]
	defer func() { scratchStatuses.Put(statuses[:cap(statuses)]) }()
	feasible := make([]*NodeInfo, 0, min(want, n))
	done := 0
	for done < n && len(feasible) < want {
		size := min(block, n-done)
		base := done
		statuses = append(statuses, make([]*Status, size)...)
		var firstErr atomic.Pointer[Status]
		parallelizeChunks(p.Parallelism, size, func(lo, hi int) {
			// runFilters keeps no reference to chunk (batch plugins are
			// handed a copy of the nodes still feasible).
			chunk := scratchNodes.Get(hi - lo)
			defer scratchNodes.Put(chunk)
			for i := range chunk {
				chunk[i] = nodes.At((d.StartIndex + base + lo + i) % n)
			}
			out := statuses[base+lo : base+hi]
			runFilters(ctx, p, state, pod, chunk, out)
			for _, st := range out {
				if st != nil && st.Code == Error {
					firstErr.CompareAndSwap(nil, st)
				}
			}
		})
		if st := firstErr.Load(); st != nil {
			return nil, nil, st
		}
		for i := 0; i < size; i++ {
			done++
			if statuses[base+i].IsSuccess() {
				feasible = append(feasible, nodes.At((d.StartIndex+base+i)%n))
				if len(feasible) == want {
					break
				}
			}
		}
	}
	d.Evaluated = done
	d.NextStartIndex = (d.StartIndex + done) % n
	var rejected map[string]*Status
	if len(feasible) == 0 {
		rejected = make(map[string]*Status, done)
	}
	for i := 0; i < done; i++ {
		st := statuses[i]
		if st.IsSuccess() {
			continue
		}
		for _, r := range st.Reasons {
			d.Rejections[r]++
		}
		d.RejectedBy[st.Plugin]++
		if rejected != nil {
			rejected[nodes.At((d.StartIndex+i)%n).Name()] = st
		}
	}
	return feasible, rejected, nil
}

// nodeList is the nodes a cycle filters: the snapshot's, or those a
// PreFilter named.
type nodeList interface {
	Len() int
	At(i int) *NodeInfo
}

type nodeSlice []*NodeInfo

func (s nodeSlice) Len() int           { return len(s) }
func (s nodeSlice) At(i int) *NodeInfo { return s[i] }

// runFilters runs the Filter plugins over a chunk of nodes, plugin by
// plugin over the nodes still feasible, so that a BatchFilterPlugin judges
// them in one call. Each node's status is the first rejection in plugin
// order, as if its plugins ran one node at a time.
func runFilters(ctx context.Context, p *Profile, state *CycleState, pod *PodInfo, nodes []*NodeInfo, out []*Status) {
	alive := scratchInts.Get(len(nodes))
	for i := range alive {
		alive[i] = i
	}
	sub := scratchNodes.Get(len(nodes))[:0]
	subOut := scratchStatuses.Get(len(nodes))[:0]
	defer func() {
		scratchInts.Put(alive)
		scratchNodes.Put(sub[:cap(sub)])
		scratchStatuses.Put(subOut[:cap(subOut)])
	}()
	for _, pl := range p.Filter {
		if len(alive) == 0 {
			return
		}
		if state.skipFilter[pl.Name()] {
			continue
		}
		judge := func(j int, st *Status) bool {
			if st.IsSuccess() || st.Code == Skip {
				return true
			}
			if !st.IsRejected() && st.Code != Error {
				// As kube-scheduler: a Filter answers Success or a
				// rejection; anything else (Wait) is an error.
				st = &Status{Code: Error, Reasons: []string{fmt.Sprintf("running %q filter plugin: %s: %s", pl.Name(), st.Code, st.Message())}}
			}
			st.Plugin = pl.Name()
			out[alive[j]] = st
			return false
		}
		keep := alive[:0]
		if bp, ok := pl.(BatchFilterPlugin); ok && len(alive) > 1 {
			sub, subOut = sub[:0], subOut[:0]
			for _, i := range alive {
				sub = append(sub, nodes[i])
				subOut = append(subOut, nil)
			}
			bp.FilterNodes(ctx, state, pod, sub, subOut)
			for j, i := range alive {
				if st := subOut[j]; st == nil || judge(j, st) {
					keep = append(keep, i)
				}
			}
		} else {
			for j, i := range alive {
				// A nil status (Success, the common answer) needs no
				// judging.
				if st := pl.Filter(ctx, state, pod, nodes[i]); st == nil || judge(j, st) {
					keep = append(keep, i)
				}
			}
		}
		alive = keep
	}
}

func score(ctx context.Context, p *Profile, state *CycleState, pod *PodInfo, nodes []*NodeInfo, d *Decision) *Status {
	for _, pl := range p.PreScore {
		st := pl.PreScore(ctx, state, pod, nodes)
		switch {
		case st.IsSuccess():
		case st.IsSkip():
			state.skipScore[pl.Name()] = true
		default:
			st.Plugin = pl.Name()
			if st.Code != Error {
				st = &Status{Code: Error, Plugin: pl.Name(), Reasons: []string{fmt.Sprintf("running PreScore plugin %q: %s: %s", pl.Name(), st.Code, st.Message())}}
			}
			return st
		}
	}
	// One parallel pass over chunks of nodes computes every plugin's raw
	// scores (a BatchScorePlugin once per chunk); then each plugin's are
	// normalized, weighted and summed in plugin order.
	var active []WeightedScore
	for _, ws := range p.Score {
		if !state.skipScore[ws.Plugin.Name()] {
			active = append(active, ws)
		}
	}
	raw := scratchInt64s.Get(len(active) * len(nodes))
	defer scratchInt64s.Put(raw)
	errs := make([]*Status, len(active))
	var failed atomic.Bool
	var errMu sync.Mutex
	fail := func(k int, st *Status) {
		if st.Code != Error {
			// As kube-scheduler: any Score status but Success fails the
			// cycle with an error.
			st = &Status{Code: Error, Reasons: []string{fmt.Sprintf("plugin %q failed with: %s: %s", active[k].Plugin.Name(), st.Code, st.Message())}}
		}
		st.Plugin = active[k].Plugin.Name()
		errMu.Lock()
		if errs[k] == nil {
			errs[k] = st
		}
		errMu.Unlock()
		failed.Store(true)
	}
	// Each chunk also takes its nodes' names and tie-break hashes, while
	// its nodes are in its core's cache.
	names := scratchStrings.Get(len(nodes))
	ties := scratchUint64s.Get(len(nodes))
	defer func() {
		scratchStrings.Put(names)
		scratchUint64s.Put(ties)
	}()
	podHash := tieBreakPod(pod.Key)
	parallelizeChunks(p.Parallelism, len(nodes), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			names[i] = nodes[i].Name()
			ties[i] = tieBreakNode(podHash, names[i])
		}
		for k, ws := range active {
			out := raw[k*len(nodes)+lo : k*len(nodes)+hi]
			if bp, ok := ws.Plugin.(BatchScorePlugin); ok {
				if st := bp.ScoreNodes(ctx, state, pod, nodes[lo:hi], out); !st.IsSuccess() {
					fail(k, st)
				}
				continue
			}
			for i, n := range nodes[lo:hi] {
				sc, st := ws.Plugin.Score(ctx, state, pod, n)
				if !st.IsSuccess() {
					fail(k, st)
				}
				out[i] = sc
			}
		}
	})
	if failed.Load() {
		for _, st := range errs {
			if st != nil {
				return st
			}
		}
	}
	totals := scratchInt64s.Get(len(nodes))
	scores := scratchScores.Get(len(nodes))
	defer func() {
		scratchInt64s.Put(totals)
		scratchScores.Put(scores)
	}()
	for k, ws := range active {
		pl := ws.Plugin
		for i, name := range names {
			scores[i] = NodeScore{Name: name, Score: raw[k*len(nodes)+i]}
		}
		if nz, ok := pl.(NormalizeScorePlugin); ok {
			if st := nz.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				if st.Code != Error {
					st = &Status{Code: Error, Reasons: []string{fmt.Sprintf("running Normalize on Score plugins: plugin %q: %s: %s", pl.Name(), st.Code, st.Message())}}
				}
				st.Plugin = pl.Name()
				return st
			}
		}
		for i := range scores {
			if scores[i].Score < MinNodeScore || scores[i].Score > MaxNodeScore {
				return &Status{Code: Error, Plugin: pl.Name(), Reasons: []string{fmt.Sprintf("score %d for node %s is outside [%d, %d]", scores[i].Score, scores[i].Name, MinNodeScore, MaxNodeScore)}}
			}
			scores[i].Score *= ws.Weight
			totals[i] += scores[i].Score
		}
		d.Scores = append(d.Scores, PluginScores{Plugin: pl.Name(), Weight: ws.Weight, Top: top(scores, ties)})
	}
	for i, name := range names {
		scores[i] = NodeScore{Name: name, Score: totals[i]}
	}
	d.Totals = top(scores, ties)
	d.Node = d.Totals[0].Name
	return nil
}

// top returns the best TopScores of scores, best first; equal scores are
// ordered by ties[i], a hash of pod and node (tieBreak), so that ties
// spread pods over nodes and still replay the same way.
func top(scores []NodeScore, ties []uint64) []NodeScore {
	type ranked struct {
		NodeScore
		tie uint64
	}
	best := make([]ranked, 0, TopScores+1)
	for i, s := range scores {
		if len(best) == TopScores {
			// Most nodes rank below the last kept: say so before
			// anything is copied.
			if last := &best[TopScores-1]; last.Score > s.Score || (last.Score == s.Score && last.tie >= ties[i]) {
				continue
			}
		}
		r := ranked{s, ties[i]}
		i := len(best)
		for i > 0 && (best[i-1].Score < r.Score || (best[i-1].Score == r.Score && best[i-1].tie < r.tie)) {
			i--
		}
		if i >= TopScores {
			continue
		}
		best = append(best, ranked{})
		copy(best[i+1:], best[i:])
		best[i] = r
		if len(best) > TopScores {
			best = best[:TopScores]
		}
	}
	out := make([]NodeScore, len(best))
	for i, r := range best {
		out[i] = r.NodeScore
	}
	return out
}

// tieBreak is FNV-1a (64 bits) of pod, a zero byte and node, computed in
// place: it runs for every node scored.
func tieBreak(pod, node string) uint64 {
	return tieBreakNode(tieBreakPod(pod), node)
}

// tieBreakPod is the part of tieBreak that depends on the pod only,
// computed once per cycle rather than once per node.
func tieBreakPod(pod string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(pod); i++ {
		h = (h ^ uint64(pod[i])) * prime
	}
	return h * prime // the zero byte: h ^ 0 == h
}

// tieBreakNode finishes tieBreak from tieBreakPod's hash.
func tieBreakNode(h uint64, node string) uint64 {
	const prime = 1099511628211
	for i := 0; i < len(node); i++ {
		h = (h ^ uint64(node[i])) * prime
	}
	return h
}

// parallelizeChunks splits [0, n) into contiguous chunks, about one per
// worker and at least 16 long, and calls fn(lo, hi) for each on up to
// workers goroutines, no more than the process has cores (GOMAXPROCS):
// the work is CPU-bound, and each chunk costs a BatchFilterPlugin or
// BatchScorePlugin a call (a WebAssembly guest decodes the cycle's pod
// once per call and instance), so more chunks than cores only add calls.
// A chunk is what a batch plugin sees in one call.
func parallelizeChunks(workers, n int, fn func(lo, hi int)) {
	if workers <= 0 {
		workers = 16
	}
	workers = min(workers, runtime.GOMAXPROCS(0))
	chunk := max(16, (n+workers-1)/workers)
	if n < 32 || workers == 1 {
		chunk = n
	}
	chunks := (n + chunk - 1) / chunk
	if chunks <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	// The caller takes the first chunk; the others go to idle pool
	// workers, whose stacks have grown to what plugins need (a
	// goroutine per chunk grew a new stack, copied, every cycle).
	var wg sync.WaitGroup
	wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		runChunk(func() {
			defer wg.Done()
			fn(c*chunk, min((c+1)*chunk, n))
		})
	}
	fn(0, min(chunk, n))
	wg.Wait()
}

// chunkWork hands chunks to the pool's idle workers.
var (
	chunkWork     = make(chan func())
	chunkPoolOnce sync.Once
)

// runChunk runs f on an idle pool worker, or on a new goroutine when none
// is idle (a chunk never waits for another cycle's, so nested or
// concurrent cycles cannot deadlock). The pool has one worker per core,
// started on first use, and lives as long as the process.
func runChunk(f func()) {
	chunkPoolOnce.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for f := range chunkWork {
					f()
				}
			}()
		}
	})
	select {
	case chunkWork <- f:
	default:
		go f()
	}
}
