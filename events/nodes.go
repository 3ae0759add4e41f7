package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
)

// Logs stream bounds: per container at most LogsPerContainer messages of
// at most LogChunkBytes each, none older than LogsMaxAge.
const (
	LogsPerContainer = 10000
	LogChunkBytes    = 16 << 10
	LogsMaxAge       = 24 * time.Hour
	logsMaxBytes     = 4 << 30
	// logsMinBytes is the least the logs stream is given when the server
	// cannot reserve logsMaxBytes.
	logsMinBytes = 16 << 20
)

// Log message headers.
const (
	hdrLogStream  = "Jp-Stream"
	hdrLogRestart = "Jp-Restart"
)

// NodeStore is the instances' side of the node agents' buckets and
// streams: JP_NODES, JP_NODEWORK, JP_LOGS and the image store. Instances
// create them; agents only bind to them (OpenNode).
type NodeStore struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	nodes  jetstream.KeyValue
	work   jetstream.KeyValue
	logs   jetstream.Stream
	images *Images
}

// NodeStore creates, or brings up to date, the node agents' buckets and
// the logs stream, with the log's replication.
func (l *Log) NodeStore(ctx context.Context) (*NodeStore, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("node buckets: %w", err)
	}
	r := info.Config.Replicas
	s := &NodeStore{js: l.js, nc: l.nc}
	if s.nodes, err = l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: NodesBucket, Description: "jetplane node heartbeats", History: 1, Replicas: r, Storage: jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", NodesBucket, err)
	}
	if s.work, err = l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: NodeWorkBucket, Description: "jetplane pods bound to each node", History: 1, Replicas: r, Storage: jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", NodeWorkBucket, err)
	}
	// The logs' bound is reserved out of the server's storage: on a small
	// disk, a smaller bound rather than no start at all.
	lc := logsStreamConfig(r)
	for {
		s.logs, err = l.js.CreateOrUpdateStream(ctx, lc)
		if err == nil || !errors.Is(translate(err), ErrStorageFull) || lc.MaxBytes <= logsMinBytes {
			break
		}
		lc.MaxBytes /= 2
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", LogsStream, err)
	}
	if s.images, err = l.Images(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// logsStreamConfig takes what agents publish on
// jp.node.<node>.logs.<ns>.<pod>.<container> and stores it as
// jp.logs.<node>.<ns>.<pod>.<container> (LogsSubject). The node stays in
// the stored subject: an agent may publish on any pod's name under its own
// node, and readers select the node the pod is bound to, so a node can
// neither add lines to another node's pod nor, through the per-subject
// bound, push that pod's real output out of the stream.
func logsStreamConfig(replicas int) jetstream.StreamConfig {
	src := NodePrefix + ".*.logs.*.*.*"
	return jetstream.StreamConfig{
		Name:        LogsStream,
		Description: "jetplane pod logs",
		Subjects:    []string{src},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: src, Destination: LogsPrefix + ".{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{wildcard(4)}}",
		},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		MaxAge:            LogsMaxAge,
		MaxBytes:          logsMaxBytes,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: LogsPerContainer,
		MaxMsgSize:        LogChunkBytes + 1024,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
	}
}

// Images is the image store.
func (s *NodeStore) Images() *Images { return s.images }

// PutWork stores the work item of pod namespace/name for node, unless it
// holds exactly that already. It reports whether it wrote.
func (s *NodeStore) PutWork(ctx context.Context, node, namespace, name string, data []byte) (bool, error) {
	key := NodeWorkKey(node, namespace, name)
	if e, err := s.work.Get(ctx, key); err == nil && bytes.Equal(e.Value(), data) {
		return false, nil
	}
	if _, err := s.work.Put(ctx, key, data); err != nil {
		return false, fmt.Errorf("put work %s: %w", key, err)
	}
	return true, nil
}

// CreateWork stores the work item of pod namespace/name for node only if
// that key never held one: not now, and not one since deleted (a deletion
// leaves a marker, which fails the create). It reports whether it wrote;
// false with a nil error when the key has or had an item.
func (s *NodeStore) CreateWork(ctx context.Context, node, namespace, name string, data []byte) (bool, error) {
	key := NodeWorkKey(node, namespace, name)
	// Revision 0: the subject must hold no message at all. (The bucket's
	// own Create would write over a deletion marker.)
	if _, err := s.work.Update(ctx, key, data, 0); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(translate(err), ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("create work %s: %w", key, err)
	}
	return true, nil
}

// DeleteWork removes the work item of pod namespace/name from node.
func (s *NodeStore) DeleteWork(ctx context.Context, node, namespace, name string) error {
	if err := s.work.Purge(ctx, NodeWorkKey(node, namespace, name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete work: %w", err)
	}
	return nil
}

// Heartbeat is a node's latest heartbeat, timed by the server.
type Heartbeat struct {
	Node string
	Data []byte
	Time time.Time
}

// Heartbeat returns node's latest heartbeat; ErrNotFound when it never
// beat.
func (s *NodeStore) Heartbeat(ctx context.Context, node string) (Heartbeat, error) {
	e, err := s.nodes.Get(ctx, NodeHeartbeatKey(node))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Heartbeat{}, fmt.Errorf("heartbeat of %s: %w", node, ErrNotFound)
	}
	if err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat of %s: %w", node, err)
	}
	return Heartbeat{Node: node, Data: e.Value(), Time: e.Created()}, nil
}

// WatchHeartbeats calls fn with every node's latest heartbeat, then with
// every new one, until ctx ends.
func (s *NodeStore) WatchHeartbeats(ctx context.Context, fn func(Heartbeat)) error {
	w, err := s.nodes.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", NodesBucket, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch %s: closed", NodesBucket)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			node, err := UnescapeToken(e.Key())
			if err != nil {
				continue
			}
			fn(Heartbeat{Node: node, Data: e.Value(), Time: e.Created()})
		}
	}
}

// ServeNodeStatus answers agents' status requests (NodeStatusSubject of
// every node) until ctx ends, one instance of a queue group per request.
// A request carries a batch of reports (ReportStatuses); fn gets the node
// named by the subject and the reports, in order, and returns one error
// per report (nil: recorded; wrapping ErrReportRefused: never to be sent
// again; any other: worth sending again).
func (s *NodeStore) ServeNodeStatus(ctx context.Context, fn func(node string, reports [][]byte) []error) error {
	sub, err := s.nc.QueueSubscribe(NodePrefix+".*.status", "jp-node-status", func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		node, err := UnescapeToken(tok[2])
		batch := m.Header.Get(hdrReports) != ""
		var reports [][]byte
		switch {
		case err != nil:
		case batch:
			reports, err = decodeReports(m.Data)
		default: // one report, as agents before batching sent them
			reports = [][]byte{m.Data}
		}
		if err != nil {
			_ = m.Respond([]byte("error: " + err.Error()))
			return
		}
		errs := fn(node, reports)
		if !batch {
			reply := []byte("ok")
			if errs[0] != nil {
				reply = []byte("error: " + errs[0].Error())
			}
			_ = m.Respond(reply)
			return
		}
		var reply []byte
		for _, err := range errs {
			var msg string
			switch {
			case err == nil:
			case errors.Is(err, ErrReportRefused):
				msg = replyRefused + err.Error()
			default:
				msg = replyRetry + err.Error()
			}
			reply = protowire.AppendTag(reply, 1, protowire.BytesType)
			reply = protowire.AppendString(reply, msg)
		}
		_ = m.Respond(reply)
	})
	if err != nil {
		return fmt.Errorf("serve node status: %w", err)
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	return ctx.Err()
}

// A batch of status reports is a protobuf message of one repeated bytes
// field (1), each an encoded schemas.Event; its reply, one repeated string
// field (1), one per report: empty when recorded, else replyRefused or
// replyRetry and why. Requests carry the header hdrReports.
const (
	hdrReports   = "Jp-Reports"
	replyRefused = "refused: "
	replyRetry   = "retry: "
)

func decodeReports(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, errors.New("undecodable batch of reports")
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errors.New("undecodable batch of reports")
		}
		out, b = append(out, v), b[n:]
	}
	return out, nil
}

// ErrReportRefused means an instance refused a status report for good
// (the pod is gone, or not bound to the node); an instance's handler wraps
// it to say so.
var ErrReportRefused = errors.New("refused")

// NodeConn is a node agent's connection: it uses only the names of
// node.go, for its own node, and never the log.
type NodeConn struct {
	node   string
	nc     *nats.Conn
	nodes  jetstream.KeyValue
	work   jetstream.KeyValue
	images *Images
}

// OpenNode binds node's agent to the buckets the instances created. It
// waits, retrying, until they exist (an agent may start before any
// instance).
func OpenNode(ctx context.Context, nc *nats.Conn, node string) (*NodeConn, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c := &NodeConn{node: node, nc: nc}
	for {
		c.nodes, err = js.KeyValue(ctx, NodesBucket)
		if err == nil {
			c.work, err = js.KeyValue(ctx, NodeWorkBucket)
		}
		if err == nil {
			var os jetstream.ObjectStore
			if os, err = js.ObjectStore(ctx, ImagesBucket); err == nil {
				c.images = &Images{os: os}
			}
		}
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("node %s: waiting for jetplane's buckets: %w (last: %v)", node, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Images is the image store, for pulling.
func (c *NodeConn) Images() *Images { return c.images }

// Beat records the node's heartbeat.
func (c *NodeConn) Beat(ctx context.Context, data []byte) error {
	if _, err := c.nodes.Put(ctx, NodeHeartbeatKey(c.node), data); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// WatchWork calls fn with every pod bound to the node, then with every
// change (deleted when the pod's item was removed), until ctx ends.
func (c *NodeConn) WatchWork(ctx context.Context, fn func(namespace, name string, data []byte, deleted bool)) error {
	w, err := c.work.Watch(ctx, NodeWorkFilter(c.node))
	if err != nil {
		return fmt.Errorf("watch work: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch work: closed")
			}
			if e == nil {
				continue
			}
			tok := strings.Split(e.Key(), ".")
			if len(tok) != 3 {
				continue
			}
			ns, err1 := UnescapeToken(tok[1])
			name, err2 := UnescapeToken(tok[2])
			if err1 != nil || err2 != nil {
				continue
			}
			fn(ns, name, e.Value(), e.Operation() != jetstream.KeyValuePut)
		}
	}
}

// ReportStatuses sends a batch of pod status reports (each an encoded
// schemas.Event) in one request and returns the instance's answer to each:
// nil when recorded, an error wrapping ErrReportRefused when it will never
// be (the pod is gone, or bound elsewhere), another error when it is worth
// sending again. err is set, and errs nil, when no answer came at all.
func (c *NodeConn) ReportStatuses(ctx context.Context, reports [][]byte) (errs []error, err error) {
	m := nats.NewMsg(NodeStatusSubject(c.node))
	m.Header.Set(hdrReports, "1")
	for _, r := range reports {
		m.Data = protowire.AppendTag(m.Data, 1, protowire.BytesType)
		m.Data = protowire.AppendBytes(m.Data, r)
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("report status: %w", err)
	}
	if msg, ok := bytes.CutPrefix(resp.Data, []byte("error: ")); ok {
		return nil, fmt.Errorf("report status: %s", msg)
	}
	answers, err := decodeReports(resp.Data)
	if err != nil || len(answers) != len(reports) {
		return nil, fmt.Errorf("report status: an answer of %d parts to %d reports (%v)", len(answers), len(reports), err)
	}
	errs = make([]error, len(reports))
	for i, a := range answers {
		if msg, ok := bytes.CutPrefix(a, []byte(replyRefused)); ok {
			errs[i] = fmt.Errorf("report status: %w: %s", ErrReportRefused, msg)
		} else if len(a) > 0 {
			errs[i] = fmt.Errorf("report status: %s", bytes.TrimPrefix(a, []byte(replyRetry)))
		}
	}
	return errs, nil
}

// PublishLog sends one chunk of a container's output (at most
// LogChunkBytes; longer output is split).
func (c *NodeConn) PublishLog(namespace, pod, container, stream string, restart int, data []byte) error {
	subj := NodeLogsSubject(c.node, namespace, pod, container)
	for len(data) > 0 {
		n := min(len(data), LogChunkBytes)
		m := nats.NewMsg(subj)
		m.Header.Set(hdrLogStream, stream)
		m.Header.Set(hdrLogRestart, fmt.Sprint(restart))
		m.Data = data[:n]
		if err := c.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("publish log: %w", err)
		}
		data = data[n:]
	}
	return nil
}

// Flush waits until the server has everything published so far.
func (c *NodeConn) Flush(ctx context.Context) error { return c.nc.FlushWithContext(ctx) }
