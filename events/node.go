package events

// Node agents speak to jetplane only on subjects and bucket keys that carry
// their node's name, so one NATS permission set per node confines an agent
// to its own work: it reads the pods bound to it, reports their status and
// logs, and heartbeats, and can touch nothing else. This file is that
// contract; the node agent, the instances that serve it, and the node role's
// permissions are all built from these names.
const (
	// NodesBucket is the key-value bucket of node heartbeats, one key per
	// node (NodeHeartbeatKey). Heartbeats never enter the log; only a
	// node's Ready/NotReady transitions do.
	NodesBucket = "JP_NODES"
	// NodeWorkBucket is the key-value bucket of the pods bound to each node,
	// written by jetplane instances (never by node agents), one key per pod
	// (NodeWorkKey). A node agent watches NodeWorkFilter and nothing else.
	NodeWorkBucket = "JP_NODEWORK"
	// LogsStream holds pods' stdout and stderr, bounded per container.
	LogsStream = "JP_LOGS"
	// NodePrefix starts every subject a node agent publishes on.
	NodePrefix = "jp.node"
	// LogsPrefix starts the subjects pods' logs are read on.
	LogsPrefix = "jp.logs"
)

// NodeHeartbeatKey is node's key in NodesBucket.
func NodeHeartbeatKey(node string) string { return EscapeToken(node) }

// NodeWorkKey is the key of pod namespace/name bound to node in
// NodeWorkBucket.
func NodeWorkKey(node, namespace, name string) string {
	return EscapeToken(node) + "." + EscapeToken(namespace) + "." + EscapeToken(name)
}

// NodeWorkFilter matches every key of node's pods in NodeWorkBucket.
func NodeWorkFilter(node string) string { return EscapeToken(node) + ".>" }

// NodeSubjects matches every subject node's agent may publish on.
func NodeSubjects(node string) string { return NodePrefix + "." + EscapeToken(node) + ".>" }

// NodeStatusSubject is where node's agent sends its pods' status, as
// requests that a jetplane instance answers after checking that the pod is
// bound to that node; the instance, not the agent, appends to the log.
func NodeStatusSubject(node string) string { return NodePrefix + "." + EscapeToken(node) + ".status" }

// NodeLogsSubject is where node's agent publishes a container's output.
func NodeLogsSubject(node, namespace, pod, container string) string {
	return NodePrefix + "." + EscapeToken(node) + ".logs." + EscapeToken(namespace) + "." + EscapeToken(pod) + "." + EscapeToken(container)
}

// LogsSubject is where JP_LOGS stores the output of a container of pod
// namespace/pod that node ran (see logsStreamConfig).
func LogsSubject(node, namespace, pod, container string) string {
	return LogsPrefix + "." + EscapeToken(node) + "." + EscapeToken(namespace) + "." + EscapeToken(pod) + "." + EscapeToken(container)
}
