package auth

import (
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetplane/jetplane/events"
)

// Role is what a credential may do.
type Role string

const (
	// RoleInstance is a jetplane process: it writes the log through its
	// write path and manages consumers and buckets. Even it may not delete
	// or purge the log or delete an event.
	RoleInstance Role = "instance"
	// RoleNode is a node agent: it reads its own node's work, reports its
	// own pods' status and logs, and heartbeats. Nothing else.
	RoleNode Role = "node"
	// RoleSubscriber reads: consumers on the log, the state and snapshot
	// buckets and pod logs. It publishes nothing a consumer does not need.
	RoleSubscriber Role = "subscriber"
	// RoleController is an out-of-process controller of some kinds: it
	// reads the log like a subscriber, keeps its replicas' membership in
	// its own bucket, and writes only by request to the instances
	// (events.ControllerSubject), which let it record status and
	// finalization of its own kinds and nothing else (decision 0050).
	RoleController Role = "controller"
)

// Roles lists the roles a person may create credentials for.
var Roles = []Role{RoleSubscriber, RoleNode, RoleController}

// Buckets and streams the roles are granted on, beyond those package
// events names for the log and the node agents.
const (
	// StateBucket is the key-value bucket of current state that outside
	// systems watch (one key per object), when an instance maintains it.
	StateBucket = "JP_STATE"
)

// readStreams are the streams a subscriber may read.
var readStreams = []string{
	events.StreamName,
	events.LogsStream,
	"KV_" + StateBucket,
	"OBJ_" + events.SnapshotBucket,
}

// destructive are the API calls that would remove events from the log.
// The stream's own config denies them too (DenyDelete, DenyPurge); the
// permissions refuse them before they reach it.
func destructive() []string {
	return []string{
		"$JS.API.STREAM.DELETE." + events.StreamName,
		"$JS.API.STREAM.PURGE." + events.StreamName,
		"$JS.API.STREAM.MSG.DELETE." + events.StreamName,
	}
}

// InboxPrefix is the inbox prefix a credential's connection must use
// (nats.CustomInboxPrefix; the nats CLI's --inbox-prefix): replies and
// consumer deliveries to it are readable by that credential alone, never
// by another node or subscriber. An instance uses the default _INBOX.
func InboxPrefix(role Role, name string) string {
	switch role {
	case RoleNode:
		return "_INBOX.node." + events.EscapeToken(name)
	case RoleSubscriber:
		return "_INBOX.sub." + events.EscapeToken(name)
	case RoleController:
		return "_INBOX.ctl." + events.EscapeToken(name)
	}
	return "_INBOX"
}

// PermissionsOf is credential c's permission set.
func PermissionsOf(c Cred) (*server.Permissions, error) {
	if c.Role == RoleController && c.Name != "" {
		return ControllerPermissions(c.Name, c.Tag), nil
	}
	return Permissions(c.Role, c.Name)
}

// Permissions is role's permission set for the credential called name
// (the node's name for RoleNode), issued without a consumer tag.
func Permissions(role Role, name string) (*server.Permissions, error) {
	switch role {
	case RoleInstance:
		return InstancePermissions(), nil
	case RoleNode:
		if name == "" {
			return nil, fmt.Errorf("node credentials need the node's name")
		}
		return NodePermissions(name), nil
	case RoleSubscriber:
		if name == "" {
			return nil, fmt.Errorf("subscriber credentials need a name")
		}
		return SubscriberPermissions(name), nil
	case RoleController:
		if name == "" {
			return nil, fmt.Errorf("controller credentials need a name")
		}
		return ControllerPermissions(name, ""), nil
	}
	return nil, fmt.Errorf("role %q: not one of instance, node, subscriber, controller", role)
}

// InstancePermissions lets a jetplane instance do everything but remove
// events: it creates and updates the stream, buckets and consumers and
// answers node agents, so an allow list would only repeat the whole API.
func InstancePermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: destructive()},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	}
}

// NodePermissions confines the agent of node to its own node: heartbeats
// under its own key in events.NodesBucket, a watch of its own keys in
// events.NodeWorkBucket (nats.go names the filter in the consumer-create
// subject, so the permission pins it), status requests and logs on its
// own events.NodeSubjects, and reading images. Every reply and delivery
// comes to its own inbox prefix.
func NodePermissions(node string) *server.Permissions {
	hb := "$KV." + events.NodesBucket + "." + events.NodeHeartbeatKey(node)
	work := "$KV." + events.NodeWorkBucket + "." + events.NodeWorkFilter(node)
	nodes, nodeWork, images := "KV_"+events.NodesBucket, "KV_"+events.NodeWorkBucket, "OBJ_"+events.ImagesBucket
	pub := []string{
		"$JS.API.INFO",
		events.NodeSubjects(node),
		// heartbeats: put and read back its own key
		hb,
		"$JS.API.STREAM.INFO." + nodes,
		"$JS.API.DIRECT.GET." + nodes + "." + hb,
		"$JS.API.STREAM.MSG.GET." + nodes,
		// its work: watch and read its own keys only
		"$JS.API.STREAM.INFO." + nodeWork,
		"$JS.API.CONSUMER.CREATE." + nodeWork + ".*." + work,
		"$JS.API.CONSUMER.INFO." + nodeWork + ".*",
		"$JS.API.CONSUMER.DELETE." + nodeWork + ".*",
		"$JS.API.DIRECT.GET." + nodeWork + "." + work,
		"$JS.FC." + nodeWork + ".>",
		// images: read any
		"$JS.API.STREAM.INFO." + images,
		"$JS.API.DIRECT.GET." + images + ".>",
		"$JS.API.STREAM.MSG.GET." + images,
		"$JS.API.CONSUMER.CREATE." + images + ".*.$O." + events.ImagesBucket + ".C.>",
		"$JS.API.CONSUMER.INFO." + images + ".*",
		"$JS.API.CONSUMER.DELETE." + images + ".*",
		"$JS.FC." + images + ".>",
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{InboxPrefix(RoleNode, node) + ".>"}},
	}
}

// SubscriberPermissions lets a subscriber read the log, the state and
// snapshot buckets and the pod logs, through consumers it creates. It
// cannot publish an event (jp.in.>, jp.ev.>), write a bucket, or change,
// delete or purge a stream or a consumer. It cannot list the consumers
// of a stream (CONSUMER.NAMES, CONSUMER.LIST): a consumer is reached by
// its name, and the names of other credentials' consumers, which hold
// their random tags (ConsumerPrefix), cannot be found (decision 0122).
func SubscriberPermissions(name string) *server.Permissions {
	pub := []string{"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"}
	for _, s := range readStreams {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+s,
			"$JS.API.CONSUMER.CREATE."+s,
			"$JS.API.CONSUMER.CREATE."+s+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+s+".*",
			"$JS.API.CONSUMER.INFO."+s+".*",
			"$JS.API.CONSUMER.MSG.NEXT."+s+".*",
			"$JS.API.DIRECT.GET."+s,
			"$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.STREAM.MSG.GET."+s,
			"$JS.ACK."+s+".>",
			"$JS.FC."+s+".>",
		)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: runtimeConsumers()},
		Subscribe: &server.SubjectPermission{Allow: []string{InboxPrefix(RoleSubscriber, name) + ".>", events.LogsPrefix + ".>"}},
	}
}

// ControllerPermissions lets controller name read what a subscriber reads,
// run its own partition consumers on the log (and unpin them, and no
// other consumer), keep its members bucket (events.ControllerBucket) and
// send write requests on its own events.ControllerSubject. It cannot
// publish an event, write another bucket, or touch the instances'
// consumers. On the log it acknowledges
// only on its own partition consumers (its reads of the log acknowledge
// nothing): an acknowledgement of a consumer that acknowledges runs
// covers every delivery below it, so another credential's would drop a
// run of this controller's triggers. What a write request may carry
// (status and finalization of its kinds) the instances check. Its
// partition consumers' names hold its consumer tag (decision 0122,
// events.ControllerConsumers), which no other credential can find: like a
// subscriber, it lists no consumers.
func ControllerPermissions(name, tag string) *server.Permissions {
	sub := SubscriberPermissions(name)
	logAcks := "$JS.ACK." + events.StreamName + ".>"
	pub := slices.DeleteFunc(slices.Clone(sub.Publish.Allow), func(s string) bool { return s == logAcks })
	legacy := events.ControllerConsumers(name, "")
	for p := range events.MaxPartitions {
		// Its consumers, and their names before decision 0108, which a
		// controller built against an earlier jetplane still reads (with
		// one acknowledgement per delivery) until it is rebuilt; and the
		// names without its tag, which a controller built before
		// decision 0122 reads with (it cannot read its tag).
		pub = append(pub,
			"$JS.ACK."+events.StreamName+"."+events.PartitionConsumer(legacy, p)+".>",
			"$JS.ACK."+events.StreamName+"."+events.ExplicitAckPartitionConsumer(legacy, p)+".>")
		// It unpins (hands a partition over) only its own consumers too.
		pub = append(pub,
			"$JS.API.CONSUMER.UNPIN."+events.StreamName+"."+events.PartitionConsumer(legacy, p),
			"$JS.API.CONSUMER.UNPIN."+events.StreamName+"."+events.ExplicitAckPartitionConsumer(legacy, p))
		if tag != "" {
			own := events.PartitionConsumer(events.ControllerConsumers(name, tag), p)
			pub = append(pub, "$JS.ACK."+events.StreamName+"."+own+".>", "$JS.API.CONSUMER.UNPIN."+events.StreamName+"."+own)
		}
	}
	kv := "KV_" + events.ControllerBucket(name)
	pub = append(pub,
		events.ControllerSubject(name),
		// its projection's reads delete their consumers when they end
		"$JS.API.CONSUMER.DELETE."+events.StreamName+".*",
		// Not STREAM.CREATE or UPDATE: a stream's configuration could
		// source other streams or republish into the log, and
		// permissions cannot look inside it. The instances make the
		// bucket (events.EnsureControllerBucket).
		"$JS.API.STREAM.INFO."+kv,
		"$JS.API.CONSUMER.CREATE."+kv,
		"$JS.API.CONSUMER.CREATE."+kv+".>",
		"$JS.API.CONSUMER.DELETE."+kv+".*",
		"$JS.API.CONSUMER.INFO."+kv+".*",
		"$JS.API.CONSUMER.MSG.NEXT."+kv+".*",
		"$JS.API.DIRECT.GET."+kv,
		"$JS.API.DIRECT.GET."+kv+".>",
		"$JS.API.STREAM.MSG.GET."+kv,
		"$KV."+events.ControllerBucket(name)+".>",
		"$JS.ACK."+kv+".>",
		"$JS.FC."+kv+".>",
	)
	deny := slices.Clone(runtimeConsumers())
	for p := range events.MaxPartitions {
		n := events.PartitionConsumer("", p)
		deny = append(deny, "$JS.API.CONSUMER.DELETE."+events.StreamName+"."+n, "$JS.API.CONSUMER.UNPIN."+events.StreamName+"."+n)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{InboxPrefix(RoleController, name) + ".>"}},
	}
}

// runtimeConsumers denies a subscriber the reconciler runtime's consumers
// on the log, whose names it could otherwise pick for its own: creating or
// updating one (changing its filter), pulling from it, acknowledging its
// deliveries. Each would take triggers from the runtime. Permissions match
// whole subject tokens, so every partition's name is listed, up to
// events.MaxPartitions; and the legacy create, which carries the name in
// its body rather than its subject, is refused on the log.
var runtimeConsumers = sync.OnceValue(func() []string {
	s := events.StreamName
	deny := make([]string, 0, 1+5*events.MaxPartitions)
	deny = append(deny, "$JS.API.CONSUMER.CREATE."+s)
	for p := range events.MaxPartitions {
		n := events.PartitionConsumer("", p)
		deny = append(deny,
			"$JS.API.CONSUMER.CREATE."+s+"."+n,
			"$JS.API.CONSUMER.CREATE."+s+"."+n+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+s+"."+n,
			"$JS.API.CONSUMER.MSG.NEXT."+s+"."+n,
			"$JS.ACK."+s+"."+n+".>",
		)
	}
	return deny
})

// OutsidePermissions is what a jetplane instance needs on a NATS
// deployment it does not run (--nats-url), as an allow list for the
// operator to give its user: the log's input subjects, the JetStream API
// (less deleting or purging the log and deleting its events), its buckets
// and object stores, acks, flow control and inboxes; and subscriptions to
// inboxes and jetplane's own service subjects.
func OutsidePermissions() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{"jp.>", "$JS.API.>", "$KV.>", "$O.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>"},
			Deny:  destructive(),
		},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", "jp.>"}},
	}
}
