package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetplane/jetplane/scheduler"
)

// UpstreamCommit is the commit of kubernetes-sigs/kube-scheduler-wasm-extension
// whose host ABI this package implements (scheduler/plugin/host.go and
// guest.go there): module and function names, signatures, encodings and
// the guest's lifecycle.
const UpstreamCommit = "9b2791f1bbea8ad75871433ca0a201d03edee714"

// HostFunction is one function the host exports to guests.
type HostFunction struct {
	Module, Name    string
	Params, Results []api.ValueType
}

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func sig(p ...api.ValueType) []api.ValueType { return p }

// HostFunctions are the functions of upstream's host ABI, at
// UpstreamCommit, that this host exports: every one the extension's guest
// SDK imports. A guest importing anything else does not load, here or
// there.
var HostFunctions = []HostFunction{
	{"k8s.io/api", "node", sig(i32, i32, i32, i32), sig(i32)},
	{"k8s.io/api", "nodeList", sig(i32, i32), sig(i32)},
	{"k8s.io/klog", "log", sig(i32, i32, i32), nil},
	{"k8s.io/klog", "logs", sig(i32, i32, i32, i32, i32), nil},
	{"k8s.io/klog", "severity", nil, sig(i32)},
	{"k8s.io/scheduler", "get_config", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "filteredNodeList", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "targetPod", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "currentNodeName", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "nodeImageStates", sig(i32, i32, i32, i32), sig(i32)},
	{"k8s.io/scheduler", "currentPod", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "result.cluster_events", sig(i32, i32), nil},
	{"k8s.io/scheduler", "result.node_names", sig(i32, i32), nil},
	{"k8s.io/scheduler", "result.nominated_node_name", sig(i32, i32), nil},
	{"k8s.io/scheduler", "result.status_reason", sig(i32, i32), nil},
	{"k8s.io/scheduler", "nodeToStatusMap", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "result.normalized_score_list", sig(i32, i32), nil},
	{"k8s.io/scheduler", "nodeScoreList", sig(i32, i32), sig(i32)},
	{"k8s.io/scheduler", "handle.eventrecorder.eventf", sig(i32, i32), nil},
	{"k8s.io/scheduler", "handle.reject_waiting_pod", sig(i32, i32, i32, i32), nil},
	{"k8s.io/scheduler", "handle.get_waiting_pod", sig(i32, i32, i32, i32), nil},
}

// callCtx is what the host functions need to answer the guest during one
// call; each instance has one, reachable from the context its calls run
// with. Result fields are what the guest set through result.* functions.
type callCtx struct {
	snap *scheduler.Snapshot
	pod  []byte
	// node is the current node, encoded; nodeName the current node's name
	// when only the name is known (Reserve, Permit, binding).
	node     *encodedNode
	nodeName string
	target   []byte
	filtered []*scheduler.NodeInfo
	statuses map[string]*scheduler.Status
	scores   []scheduler.NodeScore

	reason         string
	nodeNames      []string
	nodeNamesSet   bool
	nominated      string
	events         []scheduler.ClusterEvent
	normalized     map[string]int
	normalizedSeen bool

	// A batch call's nodes and the reasons the guest gave, by index; the
	// guest writes the entry it is at into its context area.
	nodes   []*encodedNode
	reasons []string
}

func (c *callCtx) reset() { *c = callCtx{} }

// maxReason bounds a reason the host keeps.
const maxReason = 1024

// write answers a (buf, buf_limit) → len call with d, as upstream's
// writeStringIfUnderLimit and marshalIfUnderLimit: written when it fits,
// its length in any case (0 for nothing).
func write(m api.Module, stack []uint64, ptr, limit uint32, d []byte) {
	if len(d) != 0 && uint32(len(d)) <= limit {
		m.Memory().Write(ptr, d)
	}
	stack[0] = api.EncodeU32(uint32(len(d)))
}

func read(m api.Module, ptr, size uint32) ([]byte, bool) {
	return m.Memory().Read(ptr, size)
}

// hostModules defines k8s.io/api, k8s.io/scheduler and k8s.io/klog. The
// functions are api.GoModuleFunc, not reflective Go funcs: a reflective
// call costs more than the rest of a Filter call.
func (p *Plugin) hostModules(ctx context.Context) error {
	empty := &instance{call: &callCtx{}}
	inst := func(ctx context.Context) *instance {
		in, _ := ctx.Value(ctxKey{}).(*instance)
		if in == nil {
			return empty
		}
		return in
	}
	fns := map[string]api.GoModuleFunc{
		"k8s.io/api.node": func(ctx context.Context, m api.Module, stack []uint64) {
			p.nodeFetches.Add(1)
			in := inst(ctx)
			name, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading nodeName")
			}
			write(m, stack, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), p.nodeNamed(in, string(name)))
		},
		"k8s.io/api.nodeList": func(ctx context.Context, m api.Module, stack []uint64) {
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), p.nodeList(inst(ctx).call.snap))
		},
		"k8s.io/klog.log": func(ctx context.Context, m api.Module, stack []uint64) {
			sev := int32(stack[0])
			if b, ok := read(m, api.DecodeU32(stack[1]), api.DecodeU32(stack[2])); ok {
				p.klog(sev, string(b), nil)
			}
		},
		"k8s.io/klog.logs": func(ctx context.Context, m api.Module, stack []uint64) {
			sev := int32(stack[0])
			msg, ok := read(m, api.DecodeU32(stack[1]), api.DecodeU32(stack[2]))
			if !ok {
				return
			}
			var kvs []string
			if n := api.DecodeU32(stack[4]); n != 0 {
				b, ok := read(m, api.DecodeU32(stack[3]), n)
				if !ok {
					return
				}
				kvs = fromNULTerminated(b)
			}
			p.klog(sev, string(msg), kvs)
		},
		"k8s.io/klog.severity": func(_ context.Context, _ api.Module, stack []uint64) {
			stack[0] = api.EncodeI32(p.logSeverity)
		},
		"k8s.io/scheduler.get_config": func(_ context.Context, m api.Module, stack []uint64) {
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), p.config)
		},
		"k8s.io/scheduler.filteredNodeList": func(ctx context.Context, m api.Module, stack []uint64) {
			c := inst(ctx).call
			names := make([]string, len(c.filtered))
			for i, n := range c.filtered {
				names[i] = n.Name()
			}
			b, _ := json.Marshal(names)
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), b)
		},
		"k8s.io/scheduler.targetPod": func(ctx context.Context, m api.Module, stack []uint64) {
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), inst(ctx).call.target)
		},
		"k8s.io/scheduler.currentNodeName": func(ctx context.Context, m api.Module, stack []uint64) {
			in := inst(ctx)
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), []byte(in.currentNodeName()))
		},
		"k8s.io/scheduler.nodeImageStates": func(ctx context.Context, m api.Module, stack []uint64) {
			name, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading nodeName")
			}
			write(m, stack, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]), imageStates(inst(ctx).call.snap, string(name)))
		},
		"k8s.io/scheduler.currentPod": func(ctx context.Context, m api.Module, stack []uint64) {
			p.podFetches.Add(1)
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), inst(ctx).call.pod)
		},
		"k8s.io/scheduler.result.cluster_events": func(ctx context.Context, m api.Module, stack []uint64) {
			b, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading clusterEvents")
			}
			inst(ctx).call.events = decodeClusterEvents(b)
		},
		"k8s.io/scheduler.result.node_names": func(ctx context.Context, m api.Module, stack []uint64) {
			b, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading nodeNames")
			}
			c := inst(ctx).call
			c.nodeNames, c.nodeNamesSet = fromNULTerminated(b), true
		},
		"k8s.io/scheduler.result.nominated_node_name": func(ctx context.Context, m api.Module, stack []uint64) {
			b, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading nominatedNodeName")
			}
			inst(ctx).call.nominated = string(b)
		},
		"k8s.io/scheduler.result.status_reason": func(ctx context.Context, m api.Module, stack []uint64) {
			in := inst(ctx)
			b, ok := read(m, api.DecodeU32(stack[0]), min(api.DecodeU32(stack[1]), maxReason))
			if !ok {
				b = []byte("BUG: out of memory reading message")
			}
			dst := &in.call.reason
			if in.call.nodes != nil {
				i, ok := in.batchIndex()
				if !ok {
					return
				}
				dst = &in.call.reasons[i]
			}
			setReason(dst, b, &in.lastReason)
		},
		"k8s.io/scheduler.nodeToStatusMap": func(ctx context.Context, m api.Module, stack []uint64) {
			codes := map[string]int{}
			for n, st := range inst(ctx).call.statuses {
				codes[n] = int(st.GetCode())
			}
			b, _ := json.Marshal(codes)
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), b)
		},
		"k8s.io/scheduler.result.normalized_score_list": func(ctx context.Context, m api.Module, stack []uint64) {
			b, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading normalized score list")
			}
			c := inst(ctx).call
			c.normalized = nil
			if err := json.Unmarshal(b, &c.normalized); err != nil {
				panic(err)
			}
			c.normalizedSeen = true
		},
		"k8s.io/scheduler.nodeScoreList": func(ctx context.Context, m api.Module, stack []uint64) {
			scores := map[string]int{}
			for _, s := range inst(ctx).call.scores {
				scores[s.Name] = int(s.Score)
			}
			b, _ := json.Marshal(scores)
			write(m, stack, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), b)
		},
		"k8s.io/scheduler.handle.eventrecorder.eventf": func(ctx context.Context, m api.Module, stack []uint64) {
			b, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading eventrecorder event")
			}
			var msg eventMessage
			if err := json.Unmarshal(b, &msg); err != nil {
				panic(err)
			}
			p.handle().Eventf(msg.RegardingReference.ref(), msg.RelatedReference.ref(), msg.Eventtype, msg.Reason, msg.Action, msg.Note)
		},
		"k8s.io/scheduler.handle.reject_waiting_pod": func(ctx context.Context, m api.Module, stack []uint64) {
			uid, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading rejectWaitingPod")
			}
			var v uint64
			if p.handle().RejectWaitingPod(types.UID(uid)) {
				v = 1
			}
			m.Memory().WriteUint64Le(api.DecodeU32(stack[2]), v)
		},
		"k8s.io/scheduler.handle.get_waiting_pod": func(ctx context.Context, m api.Module, stack []uint64) {
			uid, ok := read(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			if !ok {
				panic("out of memory reading getWaitingPod")
			}
			out, limit := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
			pod := p.handle().GetWaitingPod(types.UID(uid))
			if pod == nil {
				m.Memory().WriteUint64Le(out, 0)
				return
			}
			b, err := pod.Marshal()
			if err != nil {
				panic(err)
			}
			if uint32(len(b)) <= limit {
				m.Memory().Write(out, b)
			}
		},
	}
	modules := map[string]wazero.HostModuleBuilder{}
	var order []string
	for _, f := range HostFunctions {
		fn := fns[f.Module+"."+f.Name]
		if fn == nil {
			panic("scheduler/wasm: no host function " + f.Module + "." + f.Name)
		}
		b, ok := modules[f.Module]
		if !ok {
			b = p.rt.NewHostModuleBuilder(f.Module)
			order = append(order, f.Module)
		}
		modules[f.Module] = b.NewFunctionBuilder().WithGoModuleFunction(fn, f.Params, f.Results).Export(f.Name)
	}
	for _, m := range order {
		if _, err := modules[m].Instantiate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// setReason keeps the guest's reason, reusing the last string when the
// bytes are the same (a rejecting filter says the same thing for most
// nodes): no allocation per call.
func setReason(dst *string, b []byte, last *string) {
	if string(b) != *last {
		// A guest's bytes, cut at maxReason perhaps inside a character:
		// the reason is recorded in the Bound event, whose strings must
		// be UTF-8 to be read back.
		*last = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	*dst = *last
}

// fromNULTerminated splits NUL-terminated strings (upstream's encoding of
// node names and klog key-values).
func fromNULTerminated(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out
}

// gvkResources are upstream's GVK numbers of cluster event resources.
var gvkResources = [...]string{"Pod", "Node", "PersistentVolume", "PersistentVolumeClaim", "PodSchedulingContext",
	"ResourceClaim", "storage.k8s.io/StorageClass", "storage.k8s.io/CSINode", "storage.k8s.io/CSIDriver",
	"storage.k8s.io/CSIStorageCapacity", "*"}

// decodeClusterEvents reads 8-byte entries: the resource's GVK number and
// the action type, both 32-bit little endian.
func decodeClusterEvents(b []byte) []scheduler.ClusterEvent {
	var out []scheduler.ClusterEvent
	for i := 0; i+8 <= len(b); i += 8 {
		gvk := binary.LittleEndian.Uint32(b[i:])
		res := "EventResource(" + strconv.Itoa(int(gvk)) + ")"
		if int(gvk) < len(gvkResources) {
			res = gvkResources[gvk]
		}
		out = append(out, scheduler.ClusterEvent{Resource: res, ActionType: scheduler.ActionType(binary.LittleEndian.Uint32(b[i+4:]))})
	}
	return out
}

// allClusterEvents are the events of a guest that registers none, as
// upstream's host answers for it.
var allClusterEvents = []scheduler.ClusterEvent{
	{Resource: "Pod", ActionType: scheduler.All}, {Resource: "Node", ActionType: scheduler.All},
	{Resource: "storage.k8s.io/CSINode", ActionType: scheduler.All}, {Resource: "PersistentVolume", ActionType: scheduler.All},
	{Resource: "PersistentVolumeClaim", ActionType: scheduler.All}, {Resource: "storage.k8s.io/StorageClass", ActionType: scheduler.All},
}

// objectReference and eventMessage are upstream's JSON of an Eventf call.
type objectReference struct {
	Kind, APIVersion, Name, Namespace, UID, ResourceVersion string
}

func (o objectReference) ref() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: o.Kind, APIVersion: o.APIVersion, Name: o.Name, Namespace: o.Namespace,
		UID: types.UID(o.UID), ResourceVersion: o.ResourceVersion}
}

type eventMessage struct {
	RegardingReference, RelatedReference objectReference
	Eventtype, Reason, Action, Note      string
}

// klog severities, as upstream numbers them.
const (
	severityInfo int32 = iota
	severityWarning
	severityError
	severityFatal
)

// klog writes a guest's log line to the scheduler's logger, dropping
// lines below the plugin's logSeverity.
func (p *Plugin) klog(sev int32, msg string, kvs []string) {
	if sev < p.logSeverity {
		return
	}
	args := make([]any, 0, 2+len(kvs))
	args = append(args, "plugin", p.name)
	for _, kv := range kvs {
		args = append(args, kv)
	}
	if len(kvs)%2 == 1 {
		args = append(args, "")
	}
	log := p.handle().Logger()
	switch sev {
	case severityInfo:
		log.Info(msg, args...)
	case severityWarning:
		log.Warn(msg, args...)
	default:
		log.Error(msg, args...)
	}
}

// nodeNamed is the protobuf of the node named name in the call's
// snapshot, nil when there is none.
func (p *Plugin) nodeNamed(in *instance, name string) []byte {
	c := in.call
	if c.node != nil && c.node.name == name {
		return c.node.data
	}
	if c.nodes != nil {
		if i, ok := in.batchIndex(); ok && c.nodes[i].name == name {
			return c.nodes[i].data
		}
	}
	if c.snap == nil {
		return nil
	}
	n := c.snap.Get(name)
	if n == nil {
		return nil
	}
	e, err := p.encodeNode(n)
	if err != nil {
		return nil
	}
	return e.data
}

// nodeList is a v1.NodeList of the snapshot's nodes in protobuf, built
// from the encoded nodes: field 2 (items), each a length-delimited Node.
func (p *Plugin) nodeList(snap *scheduler.Snapshot) []byte {
	if snap == nil {
		return nil
	}
	var out []byte
	for _, n := range snap.Nodes() {
		e, err := p.encodeNode(n)
		if err != nil {
			continue
		}
		out = append(out, 0x12)
		out = binary.AppendUvarint(out, uint64(len(e.data)))
		out = append(out, e.data...)
	}
	if out == nil {
		// An empty list still has its (empty) metadata, as Marshal writes.
		return []byte{0x0a, 0x00}
	}
	return append([]byte{0x0a, 0x00}, out...)
}

// imageStateSummary is upstream's JSON of framework.ImageStateSummary.
type imageStateSummary struct {
	Size     int64
	NumNodes int
	Nodes    map[string]struct{}
}

var imageIndex struct {
	mu   sync.Mutex
	snap *scheduler.Snapshot
	by   map[string]map[string]struct{} // image name → nodes
}

// normalizedImageName adds ":latest" to a name without tag or digest, as
// kube-scheduler keys image states.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

// imageStates is the JSON of the node's image states: each image's size
// and the nodes of the snapshot that have it.
func imageStates(snap *scheduler.Snapshot, name string) []byte {
	if snap == nil {
		return []byte("null")
	}
	n := snap.Get(name)
	if n == nil {
		return []byte("null")
	}
	imageIndex.mu.Lock()
	if imageIndex.snap != snap {
		by := map[string]map[string]struct{}{}
		for _, ni := range snap.Nodes() {
			for _, img := range ni.Node.Status.Images {
				for _, nm := range img.Names {
					nm = normalizedImageName(nm)
					if by[nm] == nil {
						by[nm] = map[string]struct{}{}
					}
					by[nm][ni.Name()] = struct{}{}
				}
			}
		}
		imageIndex.snap, imageIndex.by = snap, by
	}
	by := imageIndex.by
	imageIndex.mu.Unlock()
	states := map[string]imageStateSummary{}
	for _, img := range n.Node.Status.Images {
		for _, nm := range img.Names {
			nm = normalizedImageName(nm)
			states[nm] = imageStateSummary{Size: img.SizeBytes, NumNodes: len(by[nm]), Nodes: by[nm]}
		}
	}
	b, _ := json.Marshal(states)
	return b
}
