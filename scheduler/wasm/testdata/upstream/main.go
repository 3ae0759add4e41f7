//go:build wasip1

// Command upstream is a guest of kube-scheduler-wasm-extension's shape,
// written without any SDK: it imports upstream's host functions by their
// module and function names, exports every hook upstream's guest SDK
// exports (a hook with nothing to do returns Success, as the SDK's do),
// keeps its cycle state in its own memory (reset by prefilter) and reads
// its pod and nodes as Kubernetes protobuf. Built with standard Go as a
// reactor (-buildmode=c-shared), it registers in init, which _initialize
// runs.
//
// Its plugin is NodeNumber (upstream's example: a node whose name ends
// with the pod name's last digit scores 10; guestConfig {"reverse": true}
// inverts it) with an optional label filter (guestConfig
// {"filterLabel": "k=v"}); pods whose names start with a conformance
// scenario ("filter-code", "panic-score", …) exercise one host function
// or hook each, as TestConformance describes.
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

//go:wasmimport k8s.io/api node
func k8sNode(name, nameLen, buf, limit uint32) uint32

//go:wasmimport k8s.io/api nodeList
func k8sNodeList(buf, limit uint32) uint32

//go:wasmimport k8s.io/klog log
func klogLog(severity, msg, msgLen uint32)

//go:wasmimport k8s.io/klog logs
func klogLogs(severity, msg, msgLen, kvs, kvsLen uint32)

//go:wasmimport k8s.io/klog severity
func klogSeverity() uint32

//go:wasmimport k8s.io/scheduler get_config
func getConfig(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler currentPod
func currentPodFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler currentNodeName
func currentNodeNameFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler targetPod
func targetPodFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler filteredNodeList
func filteredNodeListFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler nodeToStatusMap
func nodeToStatusMapFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler nodeScoreList
func nodeScoreListFn(buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler nodeImageStates
func nodeImageStatesFn(name, nameLen, buf, limit uint32) uint32

//go:wasmimport k8s.io/scheduler result.status_reason
func resultStatusReason(ptr, size uint32)

//go:wasmimport k8s.io/scheduler result.node_names
func resultNodeNames(ptr, size uint32)

//go:wasmimport k8s.io/scheduler result.nominated_node_name
func resultNominatedNodeName(ptr, size uint32)

//go:wasmimport k8s.io/scheduler result.normalized_score_list
func resultNormalizedScoreList(ptr, size uint32)

//go:wasmimport k8s.io/scheduler result.cluster_events
func resultClusterEvents(ptr, size uint32)

//go:wasmimport k8s.io/scheduler handle.eventrecorder.eventf
func eventf(ptr, size uint32)

//go:wasmimport k8s.io/scheduler handle.get_waiting_pod
func getWaitingPod(uid, uidLen, buf, limit uint32)

//go:wasmimport k8s.io/scheduler handle.reject_waiting_pod
func rejectWaitingPod(uid, uidLen, buf, limit uint32)

// Status codes, as upstream numbers them.
const (
	success       = 0
	errorCode     = 1
	unschedulable = 2
	wait          = 4
	skip          = 5
)

var buf = make([]byte, 2048)

func addr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func saddr(s string) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))) }

// get calls a (buf, limit) → len host function, retrying with a larger
// buffer as upstream's guest does.
func get(fn func(ptr, limit uint32) uint32) []byte {
	n := fn(addr(buf), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = fn(addr(buf), uint32(len(buf)))
	}
	return append([]byte(nil), buf[:n]...)
}

// view is get without the copy: the bytes stay valid until the next call.
func view(fn func(ptr, limit uint32) uint32) []byte {
	n := fn(addr(buf), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = fn(addr(buf), uint32(len(buf)))
	}
	return buf[:n]
}

// label finds label k in a Pod's or Node's protobuf (metadata, field 1;
// labels, field 11, entries of key 1 and value 2) without allocating.
func label(b []byte, k string) ([]byte, bool) {
	meta := field(b, 1)
	for len(meta) > 0 {
		num, typ, n := protowire.ConsumeTag(meta)
		if n < 0 {
			return nil, false
		}
		meta = meta[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, meta); n < 0 {
				return nil, false
			}
			meta = meta[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(meta)
		if n < 0 {
			return nil, false
		}
		meta = meta[n:]
		if num == 11 && string(field(v, 1)) == k {
			return field(v, 2), true
		}
	}
	return nil, false
}

// field is the first length-delimited field num of b.
func field(b []byte, num protowire.Number) []byte {
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if f == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return v
		}
		if n = protowire.ConsumeFieldValue(f, typ, b); n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}

var lackReason string

func reason(s string) {
	if s != "" {
		resultStatusReason(saddr(s), uint32(len(s)))
	}
}

// infoS logs through klog's logs with NUL-terminated key-values, when
// the host's severity lets info through.
func infoS(msg string, kvs ...string) {
	if klogSeverity() > 0 {
		return
	}
	var b []byte
	for _, kv := range kvs {
		b = append(b, kv...)
		b = append(b, 0)
	}
	klogLogs(0, saddr(msg), uint32(len(msg)), addr(b), uint32(len(b)))
}

func errorLog(msg string) { klogLog(2, saddr(msg), uint32(len(msg))) }

type meta struct {
	name, namespace, uid string
	labels               map[string]string
}

// decodeMeta reads field 1 (ObjectMeta) of a Pod or Node.
func decodeMeta(b []byte) meta {
	m := meta{labels: map[string]string{}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num == 0 {
			return m
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return m
			}
			b = b[n:]
			for len(v) > 0 {
				f, t, n := protowire.ConsumeTag(v)
				v = v[n:]
				if t != protowire.BytesType {
					v = v[protowire.ConsumeFieldValue(f, t, v):]
					continue
				}
				s, n := protowire.ConsumeBytes(v)
				v = v[n:]
				switch f {
				case 1:
					m.name = string(s)
				case 3:
					m.namespace = string(s)
				case 5:
					m.uid = string(s)
				case 11:
					var k, val string
					for len(s) > 0 {
						ef, _, n := protowire.ConsumeTag(s)
						s = s[n:]
						e, n := protowire.ConsumeBytes(s)
						s = s[n:]
						if ef == 1 {
							k = string(e)
						} else {
							val = string(e)
						}
					}
					m.labels[k] = val
				}
			}
			return m
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return m
		}
		b = b[n:]
	}
	return m
}

var config struct {
	Reverse     bool   `json:"reverse"`
	FilterLabel string `json:"filterLabel"`
	Panic       string `json:"panic"`
}

// cycle state, reset by prefilter as the SDK resets it.
var (
	pod       *meta
	cycleVals = map[string]any{}
)

func currentPod() meta {
	if pod == nil {
		m := decodeMeta(get(currentPodFn))
		pod = &m
	}
	return *pod
}

func currentNodeName() string { return string(get(currentNodeNameFn)) }

func nodeNamed(name string) meta {
	return decodeMeta(get(func(ptr, limit uint32) uint32 { return k8sNode(saddr(name), uint32(len(name)), ptr, limit) }))
}

func is(scenario string) bool { return strings.HasPrefix(currentPod().name, scenario) }

func maybePanic(hook string) {
	if p := currentPod().name; strings.HasPrefix(p, "panic-") && p[len("panic-"):] == hook {
		panic("boom in " + hook)
	}
}

func lastDigit(s string) (int, bool) {
	if s == "" || s[len(s)-1] < '0' || s[len(s)-1] > '9' {
		return 0, false
	}
	return int(s[len(s)-1] - '0'), true
}

func init() {
	if c := get(getConfig); len(c) > 0 {
		if err := json.Unmarshal(c, &config); err != nil {
			panic(fmt.Errorf("decode guestConfig: %w", err))
		}
	}
	if config.Panic == "init" {
		panic("boom in init")
	}
	lackReason = "node(s) lack " + config.FilterLabel
}

//go:wasmexport enqueue
func enqueue() {
	if config.Panic == "enqueue" {
		panic("boom in enqueue")
	}
	// NodeNumber's events: a node added; and a pod deleted. 8 bytes each:
	// the GVK number (Pod 0, Node 1), the action type (Add 1, Delete 2).
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 2)
	resultClusterEvents(addr(b), uint32(len(b)))
}

// cycles counts prefilter calls: a collection every 256 cycles. A
// reactor's goroutines run only inside calls, and with them the
// collector's background workers: a guest that allocates on every call
// outgrows its memory limit unless it collects now and then.
var cycles int

//go:wasmexport prefilter
func prefilter() uint32 {
	if cycles++; cycles%256 == 0 {
		runtime.GC()
	}
	pod, cycleVals = nil, map[string]any{"prefilter": true}
	maybePanic("prefilter")
	switch {
	case is("prefilter-names"):
		names := []byte("n1\x00n3\x00")
		resultNodeNames(addr(names), uint32(len(names)))
	case is("prefilter-reject"):
		reason("prefilter says no")
		return unschedulable
	case is("permit-rejecter"):
		// get_waiting_pod writes the pod (or a zero word when none waits)
		// and returns nothing: read the buffer up to its first zero tag.
		uid := "uid-waiting"
		out := make([]byte, 64<<10)
		getWaitingPod(saddr(uid), uint32(len(uid)), addr(out), uint32(len(out)))
		found := "false"
		if m := decodeMeta(out); m.name != "" {
			found = m.name
		}
		res := make([]byte, 8)
		rejectWaitingPod(saddr(uid), uint32(len(uid)), addr(res), 8)
		infoS("waiting pod", "found", found, "rejected", fmt.Sprint(binary.LittleEndian.Uint64(res)))
	case is("klog"):
		infoS("klog info", "pod", currentPod().name)
		errorLog("klog error " + currentPod().name)
	case is("event"):
		p := currentPod()
		msg, _ := json.Marshal(map[string]any{
			"RegardingReference": map[string]string{"Kind": "Pod", "APIVersion": "v1", "Name": p.name, "Namespace": p.namespace, "UID": p.uid},
			"RelatedReference":   map[string]string{},
			"Eventtype":          "Normal", "Reason": "PreFilter", "Action": "Checked", "Note": "from the guest",
		})
		eventf(addr(msg), uint32(len(msg)))
	}
	return success
}

//go:wasmexport filter
func filter() uint32 {
	maybePanic("filter")
	if config.FilterLabel != "" && !strings.HasPrefix(currentPod().name, "filter-") {
		// The benchmark's hot path: no allocation.
		return filterLabel()
	}
	name := currentNodeName()
	switch {
	case is("filter-code"):
		d, _ := lastDigit(name)
		reason(fmt.Sprintf("code %d", d))
		return uint32(d)
	case is("filter-none"), is("postfilter-nominate"):
		reason("nothing fits")
		return unschedulable
	case is("filter-print"):
		fmt.Println("hello from filter on", name)
	case is("filter-node"):
		if nodeNamed(name).labels["ok"] != "yes" {
			reason("node lacks ok=yes")
			return unschedulable
		}
	}
	if config.FilterLabel != "" {
		return filterLabel()
	}
	return success
}

var nameBuf = make([]byte, 256)

// filterLabel: "k=v", the label with that value; "k", the label. The node
// is read in place, its name into a buffer of its own.
func filterLabel() uint32 {
	n := currentNodeNameFn(addr(nameBuf), uint32(len(nameBuf)))
	if int(n) > len(nameBuf) {
		nameBuf = make([]byte, n)
		n = currentNodeNameFn(addr(nameBuf), n)
	}
	k, v, withValue := strings.Cut(config.FilterLabel, "=")
	node := view(func(ptr, limit uint32) uint32 { return k8sNode(addr(nameBuf), n, ptr, limit) })
	got, has := label(node, k)
	if !has || (withValue && string(got) != v) {
		reason(lackReason)
		return unschedulable
	}
	return success
}

//go:wasmexport postfilter
func postfilter() uint64 {
	maybePanic("postfilter")
	statuses := get(nodeToStatusMapFn)
	infoS("postfilter", "statuses", string(statuses))
	if !is("postfilter-nominate") {
		return success
	}
	nominated := "n1"
	resultNominatedNodeName(saddr(nominated), uint32(len(nominated)))
	const modeOverride = 1
	return modeOverride<<32 | success
}

//go:wasmexport prescore
func prescore() uint32 {
	maybePanic("prescore")
	var names []string
	_ = json.Unmarshal(get(filteredNodeListFn), &names)
	cycleVals["filtered"] = names
	if d, ok := lastDigit(currentPod().name); ok {
		cycleVals["podnum"] = d
	}
	if is("prescore-fail") {
		reason("prescore failed")
		return unschedulable
	}
	return success
}

func score32(s int32, code uint32) uint64 { return uint64(uint32(s))<<32 | uint64(code) }

//go:wasmexport score
func score() uint64 {
	maybePanic("score")
	name := currentNodeName()
	d, _ := lastDigit(name)
	switch {
	case is("score-signed"), is("score-normalize"):
		return score32(-1-int32(d), success)
	case is("score-error"):
		reason("score failed")
		return score32(0, errorCode)
	case is("score-unschedulable"):
		reason("score says unschedulable")
		return score32(0, unschedulable)
	case is("score-cyclestate"):
		filtered, _ := cycleVals["filtered"].([]string)
		if cycleVals["prefilter"] == true && len(filtered) > 0 && filtered[len(filtered)-1] == name {
			return score32(100, success)
		}
		return score32(0, success)
	case is("score-images"):
		var states map[string]struct{ Size, NumNodes int64 }
		_ = json.Unmarshal(get(func(ptr, limit uint32) uint32 {
			return nodeImageStatesFn(saddr(name), uint32(len(name)), ptr, limit)
		}), &states)
		return score32(int32(states["img:latest"].NumNodes*10+states["img:latest"].Size), success)
	case is("score-nodelist"):
		list := get(k8sNodeList)
		n := 0
		for b := list; len(b) > 0; {
			num, typ, k := protowire.ConsumeTag(b)
			b = b[k:]
			if num == 2 {
				n++
			}
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
		}
		return score32(int32(n), success)
	}
	// NodeNumber.
	match := true
	if podnum, ok := cycleVals["podnum"].(int); ok {
		match = d == podnum && name != "" && name[len(name)-1] >= '0' && name[len(name)-1] <= '9'
	}
	if config.Reverse {
		match = !match
	}
	if match {
		return score32(10, success)
	}
	return score32(0, success)
}

//go:wasmexport normalizescore
func normalizescore() uint32 {
	maybePanic("normalizescore")
	if !is("score-normalize") {
		return success
	}
	var scores map[string]int
	_ = json.Unmarshal(get(nodeScoreListFn), &scores)
	for k, v := range scores {
		scores[k] = -v
	}
	b, _ := json.Marshal(scores)
	resultNormalizedScoreList(addr(b), uint32(len(b)))
	return success
}

//go:wasmexport reserve
func reserve() uint32 {
	maybePanic("reserve")
	infoS("reserve", "pod", currentPod().name, "node", currentNodeName())
	if is("reserve-reject") {
		reason("reserve says no")
		return unschedulable
	}
	return success
}

//go:wasmexport unreserve
func unreserve() {
	maybePanic("unreserve")
	infoS("unreserve", "pod", currentPod().name, "node", currentNodeName())
}

//go:wasmexport permit
func permit() uint64 {
	maybePanic("permit")
	switch {
	case is("permit-waiting"):
		return wait<<32 | 30000
	case is("permit-timeout"):
		return wait<<32 | 50
	case is("permit-reject"):
		reason("permit says no")
		return unschedulable << 32
	}
	return success
}

//go:wasmexport prebind
func prebind() uint32 {
	maybePanic("prebind")
	infoS("prebind", "pod", currentPod().name, "node", currentNodeName(), "podnum", fmt.Sprint(cycleVals["podnum"]))
	if is("prebind-fail") {
		reason("prebind failed")
		return errorCode
	}
	return success
}

//go:wasmexport bind
func bind() uint32 {
	maybePanic("bind")
	infoS("bind", "pod", currentPod().name, "node", currentNodeName())
	if is("bind-fail") {
		reason("bind failed")
		return errorCode
	}
	return skip
}

//go:wasmexport postbind
func postbind() {
	maybePanic("postbind")
	infoS("postbind", "pod", currentPod().name, "node", currentNodeName())
}

//go:wasmexport addpod
func addpod() uint32 {
	maybePanic("addpod")
	infoS("addpod", "pod", currentPod().name, "target", decodeMeta(get(targetPodFn)).name, "node", currentNodeName())
	return success
}

//go:wasmexport removepod
func removepod() uint32 {
	maybePanic("removepod")
	infoS("removepod", "pod", currentPod().name, "target", decodeMeta(get(targetPodFn)).name, "node", currentNodeName())
	return success
}

func main() {}
