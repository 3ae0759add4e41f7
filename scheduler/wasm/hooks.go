package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/scheduler"
)

// status is a guest's status: upstream's codes are Kubernetes' and pass
// through unchanged (the framework decides what a code means where).
func status(code int32, reason string) *scheduler.Status {
	if code == 0 {
		return nil
	}
	var reasons []string
	if reason != "" {
		reasons = []string{reason}
	}
	return scheduler.NewStatus(scheduler.Code(code), reasons...)
}

func (p *Plugin) fail(err error) *scheduler.Status {
	return scheduler.AsStatus(fmt.Errorf("wasm plugin %s: %w", p.name, err))
}

// run calls export name on in (a stateful guest's instance, its calls
// serialized): setup fills the call's arguments, done reads its results.
func (p *Plugin) run(in *instance, name string, setup func(c *callCtx), done func(res uint64, c *callCtx)) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := in.call
	c.reset()
	setup(c)
	res, err := p.call(in, name, in.fn(name))
	if err == nil && done != nil {
		done(res, c)
	}
	c.reset()
	return err
}

// onScheduling runs export name on the scheduling cycle's instance.
func (p *Plugin) onScheduling(name string, setup func(c *callCtx), done func(res uint64, c *callCtx)) error {
	in, err := p.scheduling()
	if err != nil {
		return fmt.Errorf("new instance: %w", err)
	}
	return p.run(in, name, setup, done)
}

// PreFilterResult implements scheduler.PreFilterResultPlugin: the guest's
// prefilter, whose result.node_names (when it sets any) narrows the nodes.
func (p *Plugin) PreFilterResult(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo) ([]string, *scheduler.Status) {
	pb, err := podBytes(state, pod)
	if err != nil {
		return nil, scheduler.AsStatus(err)
	}
	if !p.exports[exPreFilter] {
		return nil, nil
	}
	var names []string
	var st *scheduler.Status
	err = p.onScheduling(exPreFilter, func(c *callCtx) {
		c.snap, c.pod = state.Snapshot, pb
	}, func(res uint64, c *callCtx) {
		if len(c.nodeNames) > 0 {
			names = c.nodeNames
		}
		st = status(int32(res), c.reason)
	})
	if err != nil {
		return nil, p.fail(err)
	}
	return names, st
}

// PreFilter implements scheduler.PreFilterPlugin.
func (p *Plugin) PreFilter(ctx context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo) *scheduler.Status {
	_, st := p.PreFilterResult(ctx, state, pod)
	return st
}

// Filter implements scheduler.FilterPlugin.
func (p *Plugin) Filter(ctx context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) *scheduler.Status {
	out := []*scheduler.Status{nil}
	p.FilterNodes(ctx, state, pod, []*scheduler.NodeInfo{node}, out)
	return out[0]
}

// FilterNodes implements scheduler.BatchFilterPlugin: batch calls when the
// guest has them, else one call per node (on the scheduling instance for
// a stateful guest).
func (p *Plugin) FilterNodes(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, out []*scheduler.Status) {
	failAll := func(err error) {
		st := p.fail(err)
		for i := range out {
			out[i] = st
		}
	}
	pb, err := podBytes(state, pod)
	if err != nil {
		failAll(err)
		return
	}
	enc, err := p.encodeNodes(nodes)
	if err != nil {
		failAll(err)
		return
	}
	defer scratchEncoded.Put(enc)
	if p.parallel {
		if p.filtBatch && len(nodes) > 1 {
			results, reasons := scratchResults.Get(len(nodes)), scratchReasons.Get(len(nodes))
			defer scratchResults.Put(results)
			defer scratchReasons.Put(reasons)
			if err := p.invokeBatch("jetplane_filter_nodes", state, pb, enc, results, reasons); err != nil {
				failAll(err)
				return
			}
			for i := range out {
				out[i] = status(int32(results[i]), reasons[i])
			}
			return
		}
		for i, e := range enc {
			res, reason, err := p.invoke(exFilter, state, pb, e)
			if err != nil {
				out[i] = p.fail(err)
				continue
			}
			out[i] = status(int32(res), reason)
		}
		return
	}
	in, err := p.scheduling()
	if err != nil {
		failAll(err)
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, e := range enc {
		c := in.call
		c.reset()
		c.snap, c.pod, c.node = state.Snapshot, pb, e
		p.writeArea(in, state.Cycle, e)
		res, err := p.call(in, exFilter, in.fn(exFilter))
		if err != nil {
			st := p.fail(err)
			for j := i; j < len(out); j++ {
				out[j] = st
			}
			return
		}
		out[i] = status(int32(res), c.reason)
	}
	in.call.reset()
}

// PostFilter implements scheduler.PostFilterPlugin: the guest sees the
// rejected nodes' codes (nodeToStatusMap) and may nominate a node
// (result.nominated_node_name, with nominating mode Override).
func (p *Plugin) PostFilter(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, rejected map[string]*scheduler.Status) (string, *scheduler.Status) {
	pb, err := podBytes(state, pod)
	if err != nil {
		return "", scheduler.AsStatus(err)
	}
	var nominated string
	var st *scheduler.Status
	err = p.onScheduling(exPostFilter, func(c *callCtx) {
		c.snap, c.pod, c.statuses = state.Snapshot, pb, rejected
	}, func(res uint64, c *callCtx) {
		const modeOverride = 1
		if int32(res>>32) == modeOverride {
			nominated = c.nominated
		}
		st = status(int32(res), c.reason)
	})
	if err != nil {
		return "", p.fail(err)
	}
	return nominated, st
}

// PreScore implements scheduler.PreScorePlugin: the guest sees the
// feasible nodes' names (filteredNodeList).
func (p *Plugin) PreScore(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo) *scheduler.Status {
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	var st *scheduler.Status
	err = p.onScheduling(exPreScore, func(c *callCtx) {
		c.snap, c.pod, c.filtered = state.Snapshot, pb, nodes
	}, func(res uint64, c *callCtx) { st = status(int32(res), c.reason) })
	if err != nil {
		return p.fail(err)
	}
	return st
}

// Score implements scheduler.ScorePlugin.
func (p *Plugin) Score(ctx context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) (int64, *scheduler.Status) {
	scores := []int64{0}
	st := p.ScoreNodes(ctx, state, pod, []*scheduler.NodeInfo{node}, scores)
	return scores[0], st
}

// scoreResult splits a score export's result: the score is the high 32
// bits, signed, the code the low 32.
func scoreResult(res uint64) (int64, int32) { return int64(int32(res >> 32)), int32(res) }

// ScoreNodes implements scheduler.BatchScorePlugin.
func (p *Plugin) ScoreNodes(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, nodes []*scheduler.NodeInfo, scores []int64) *scheduler.Status {
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	enc, err := p.encodeNodes(nodes)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	defer scratchEncoded.Put(enc)
	if p.parallel {
		if p.scoreBatch && len(nodes) > 1 {
			results, reasons := scratchResults.Get(len(nodes)), scratchReasons.Get(len(nodes))
			defer scratchResults.Put(results)
			defer scratchReasons.Put(reasons)
			if err := p.invokeBatch("jetplane_score_nodes", state, pb, enc, results, reasons); err != nil {
				return p.fail(err)
			}
			for i, r := range results {
				s, code := scoreResult(r)
				if st := status(code, reasons[i]); !st.IsSuccess() {
					return st
				}
				scores[i] = s
			}
			return nil
		}
		for i, e := range enc {
			res, reason, err := p.invoke(exScore, state, pb, e)
			if err != nil {
				return p.fail(err)
			}
			s, code := scoreResult(res)
			if st := status(code, reason); !st.IsSuccess() {
				return st
			}
			scores[i] = s
		}
		return nil
	}
	in, err := p.scheduling()
	if err != nil {
		return p.fail(err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	defer in.call.reset()
	for i, e := range enc {
		c := in.call
		c.reset()
		c.snap, c.pod, c.node = state.Snapshot, pb, e
		p.writeArea(in, state.Cycle, e)
		res, err := p.call(in, exScore, in.fn(exScore))
		if err != nil {
			return p.fail(err)
		}
		s, code := scoreResult(res)
		if st := status(code, c.reason); !st.IsSuccess() {
			return st
		}
		scores[i] = s
	}
	return nil
}

// NormalizeScore implements scheduler.NormalizeScorePlugin: the guest sees
// the scores (nodeScoreList) and returns new ones by node name
// (result.normalized_score_list); without that export, or when it returns
// none, the scores stand.
func (p *Plugin) NormalizeScore(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, scores []scheduler.NodeScore) *scheduler.Status {
	if !p.exports[exNormalizeScore] {
		return nil
	}
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	var st *scheduler.Status
	err = p.onScheduling(exNormalizeScore, func(c *callCtx) {
		c.snap, c.pod, c.scores = state.Snapshot, pb, scores
	}, func(res uint64, c *callCtx) {
		st = status(int32(res), c.reason)
		if !st.IsSuccess() || len(c.normalized) == 0 {
			return
		}
		if len(c.normalized) != len(scores) {
			st = scheduler.NewStatus(scheduler.Error, fmt.Sprintf("size mismatch: scores has %d elements, but the normalized scores have %d", len(scores), len(c.normalized)))
			return
		}
		for i := range scores {
			v, ok := c.normalized[scores[i].Name]
			if !ok {
				st = scheduler.NewStatus(scheduler.Error, "the normalized scores lack node "+scores[i].Name)
				return
			}
			scores[i].Score = int64(v)
		}
	})
	if err != nil {
		return p.fail(err)
	}
	return st
}

// onNode runs a hook that sees the pod and a node name (Reserve, Permit,
// and the binding cycle's), on in.
func (p *Plugin) onNode(in *instance, name string, state *scheduler.CycleState, pod *scheduler.PodInfo, node string, done func(res uint64, c *callCtx)) error {
	pb, err := podBytes(state, pod)
	if err != nil {
		return err
	}
	return p.run(in, name, func(c *callCtx) {
		c.snap, c.pod, c.nodeName = state.Snapshot, pb, node
	}, done)
}

// Reserve implements scheduler.ReservePlugin.
func (p *Plugin) Reserve(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) *scheduler.Status {
	if !p.exports[exReserve] {
		return nil
	}
	in, err := p.scheduling()
	if err != nil {
		return p.fail(err)
	}
	var st *scheduler.Status
	if err := p.onNode(in, exReserve, state, pod, node, func(res uint64, c *callCtx) { st = status(int32(res), c.reason) }); err != nil {
		return p.fail(err)
	}
	return st
}

// Unreserve implements scheduler.ReservePlugin; it ends the pod's binding
// cycle (its instance goes back to the pool). A failure is logged.
func (p *Plugin) Unreserve(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) {
	defer p.freeBinding(pod.Pod.UID)
	if !p.exports[exUnreserve] {
		return
	}
	p.assignMu.Lock()
	in := p.binding[pod.Pod.UID]
	p.assignMu.Unlock()
	if in == nil {
		var err error
		if in, err = p.scheduling(); err != nil {
			p.handle().Logger().Error("wasm plugin: unreserve", "plugin", p.name, "err", err)
			return
		}
	}
	if err := p.onNode(in, exUnreserve, state, pod, node, nil); err != nil {
		p.handle().Logger().Error("wasm plugin: unreserve failed", "plugin", p.name, "pod", pod.Key, "err", err)
	}
}

// Permit implements scheduler.PermitPlugin: the result's high 32 bits are
// the code (Wait makes the pod wait), the low 32 the timeout in
// milliseconds. The instance then moves to the pod's binding cycle.
func (p *Plugin) Permit(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) (*scheduler.Status, time.Duration) {
	var st *scheduler.Status
	var timeout time.Duration
	in, err := p.scheduling()
	if err == nil {
		err = p.onNode(in, exPermit, state, pod, node, func(res uint64, c *callCtx) {
			st = status(int32(res>>32), c.reason)
			timeout = time.Duration(uint32(res)) * time.Millisecond
		})
	}
	if err != nil {
		st = p.fail(err)
	}
	if _, err := p.forBinding(pod.Pod.UID); err != nil && st.IsSuccess() {
		st = p.fail(err)
	}
	return st, timeout
}

// onBinding runs a binding-cycle hook on the pod's binding instance.
func (p *Plugin) onBinding(name string, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) *scheduler.Status {
	in, err := p.forBinding(pod.Pod.UID)
	if err != nil {
		return p.fail(err)
	}
	var st *scheduler.Status
	if err := p.onNode(in, name, state, pod, node, func(res uint64, c *callCtx) { st = status(int32(res), c.reason) }); err != nil {
		return p.fail(err)
	}
	return st
}

// PreBind implements scheduler.PreBindPlugin.
func (p *Plugin) PreBind(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) *scheduler.Status {
	if !p.exports[exPreBind] {
		return nil
	}
	return p.onBinding(exPreBind, state, pod, node)
}

// Bind implements scheduler.BindPlugin. A guest cannot bind a pod itself
// (it has no API): under kube-scheduler the DefaultBinder, which comes
// first, binds, and the guest's bind only observes or fails. So Success
// and Skip both pass to the next binder, jetplane's, which appends the
// Bound event; any other code fails the binding.
func (p *Plugin) Bind(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) *scheduler.Status {
	if !p.exports[exBind] {
		return scheduler.NewStatus(scheduler.Skip)
	}
	st := p.onBinding(exBind, state, pod, node)
	if st.IsSuccess() {
		return scheduler.NewStatus(scheduler.Skip)
	}
	return st
}

// PostBind implements scheduler.PostBindPlugin; it ends the pod's binding
// cycle. A failure is logged.
func (p *Plugin) PostBind(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, node string) {
	defer p.freeBinding(pod.Pod.UID)
	if !p.exports[exPostBind] {
		return
	}
	if st := p.onBinding(exPostBind, state, pod, node); st != nil && st.Code == scheduler.Error {
		p.handle().Logger().Error("wasm plugin: postbind failed", "plugin", p.name, "pod", pod.Key, "err", st.Message())
	}
}

// EventsToRegister implements scheduler.EnqueueExtensions: the events the
// guest's enqueue registered at load, or every event when it has none.
func (p *Plugin) EventsToRegister(context.Context) []scheduler.ClusterEvent { return p.events }

// AddPod is upstream's PreFilterExtensions.AddPod (addpod): the guest
// sees the pod being scheduled, the pod added (targetPod) and the node.
// jetplane does not preempt, so its framework never calls it.
func (p *Plugin) AddPod(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, add *v1.Pod, node *scheduler.NodeInfo) *scheduler.Status {
	return p.podExtension(exAddPod, state, pod, add, node)
}

// RemovePod is upstream's PreFilterExtensions.RemovePod (removepod).
func (p *Plugin) RemovePod(_ context.Context, state *scheduler.CycleState, pod *scheduler.PodInfo, remove *v1.Pod, node *scheduler.NodeInfo) *scheduler.Status {
	return p.podExtension(exRemovePod, state, pod, remove, node)
}

func (p *Plugin) podExtension(name string, state *scheduler.CycleState, pod *scheduler.PodInfo, target *v1.Pod, node *scheduler.NodeInfo) *scheduler.Status {
	if !p.exports[name] {
		return nil
	}
	pb, err := podBytes(state, pod)
	if err != nil {
		return scheduler.AsStatus(err)
	}
	tb, err := target.Marshal()
	if err != nil {
		return scheduler.AsStatus(err)
	}
	var st *scheduler.Status
	err = p.onScheduling(name, func(c *callCtx) {
		c.snap, c.pod, c.target, c.nodeName = state.Snapshot, pb, tb, node.Name()
	}, func(res uint64, c *callCtx) { st = status(int32(res), c.reason) })
	if err != nil {
		return p.fail(err)
	}
	return st
}

// Scratch slices of one call (see scheduler.Scratch).
var (
	scratchResults scheduler.Scratch[uint64]
	scratchReasons scheduler.Scratch[string]
	scratchEncoded scheduler.Scratch[*encodedNode]
)

// encodeNodes encodes (once per revision) the nodes of a call; the caller
// gives the slice back to scratchEncoded.
func (p *Plugin) encodeNodes(nodes []*scheduler.NodeInfo) ([]*encodedNode, error) {
	out := scratchEncoded.Get(len(nodes))
	for i, n := range nodes {
		e, err := p.encodeNode(n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// writeArea writes a call's cycle, node slot and revision into the
// guest's context area (decision 0018), when it has one.
func (p *Plugin) writeArea(in *instance, cycle uint64, e *encodedNode) bool {
	if in.area == 0 {
		return true
	}
	m := in.mem
	return m.WriteUint64Le(in.area, cycle) && m.WriteUint64Le(in.area+8, e.slot) && m.WriteUint64Le(in.area+16, e.rev)
}

// invoke runs a filter or score call of a stateless guest on a pooled
// instance.
func (p *Plugin) invoke(name string, state *scheduler.CycleState, pod []byte, node *encodedNode) (uint64, string, error) {
	in, err := p.get()
	if err != nil {
		return 0, "", fmt.Errorf("new instance: %w", err)
	}
	c := in.call
	c.snap, c.pod, c.node, c.reason = state.Snapshot, pod, node, ""
	if !p.writeArea(in, state.Cycle, node) {
		p.discard(in)
		return 0, "", errors.New("guest context area is outside memory")
	}
	res, err := p.call(in, name, in.fn(name))
	reason := c.reason
	c.reset()
	if err != nil {
		return 0, "", err
	}
	if in.state.Load() == 0 {
		p.put(in)
	}
	return res, reason, nil
}

// batchEntry is the size of one batch entry in guest memory: the node's
// slot, its revision, and the guest's result (decision 0031).
const batchEntry = 24

// invokeBatch runs a batch export over nodes, one call per chunk of the
// guest's batch area; results[i] and reasons[i] are nodes[i]'s.
func (p *Plugin) invokeBatch(name string, state *scheduler.CycleState, pod []byte, nodes []*encodedNode, results []uint64, reasons []string) error {
	for lo := 0; lo < len(nodes); {
		in, err := p.get()
		if err != nil {
			return fmt.Errorf("new instance: %w", err)
		}
		hi := min(lo+in.batchCap, len(nodes))
		if err := p.callBatch(name, in, state, pod, nodes[lo:hi], results[lo:hi], reasons[lo:hi]); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

func (p *Plugin) callBatch(name string, in *instance, state *scheduler.CycleState, pod []byte, nodes []*encodedNode, results []uint64, reasons []string) error {
	c := in.call
	c.snap, c.pod, c.nodes, c.reasons = state.Snapshot, pod, nodes, reasons
	defer c.reset()
	size := uint32(len(nodes) * batchEntry)
	view, ok := in.mem.Read(in.batch, size)
	if !ok || !in.mem.WriteUint64Le(in.area, state.Cycle) {
		p.discard(in)
		return errors.New("guest batch area is outside memory")
	}
	for i, e := range nodes {
		binary.LittleEndian.PutUint64(view[i*batchEntry:], e.slot)
		binary.LittleEndian.PutUint64(view[i*batchEntry+8:], e.rev)
	}
	in.stack[0] = uint64(len(nodes))
	res, err := p.call(in, name, in.fn(name))
	if err != nil {
		return err
	}
	if res != 0 {
		p.discard(in)
		return fmt.Errorf("guest could not decode the pod or a node (code %d); its instance was replaced", uint32(res))
	}
	// The guest may have grown its memory: take the view again.
	if view, ok = in.mem.Read(in.batch, size); !ok {
		p.discard(in)
		return errors.New("guest batch area is outside memory")
	}
	for i := range nodes {
		results[i] = binary.LittleEndian.Uint64(view[i*batchEntry+16:])
	}
	if in.state.Load() == 0 {
		p.put(in)
	}
	return nil
}
