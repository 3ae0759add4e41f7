package gate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Role is what a principal is, and so what it may do (see Authorize).
type Role string

const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleWriter applies and deletes objects, within its namespaces when
	// confined.
	RoleWriter Role = "writer"
	// RoleReader only reads.
	RoleReader Role = "reader"
	// RoleNode is a node agent: it writes its own Node object and nothing
	// else through the gate.
	RoleNode Role = "node"
	// RoleController is a reconciler writing the children of one owner,
	// with the scope of the principal that last set the owner's spec.
	RoleController Role = "controller"
	// RoleBridge records what one Kubernetes cluster holds, under that
	// cluster's keys ("<cluster>/<namespace>").
	RoleBridge Role = "bridge"
	// RoleScheduler binds pods to nodes, and does nothing else.
	RoleScheduler Role = "scheduler"
)

// Principal is who writes. Every write the gate takes carries one.
type Principal struct {
	// Name is recorded as the events' actor: user/<name>, node/<name>,
	// reconciler/<kind>@<instance>, bridge/<cluster>.
	Name string
	Role Role
	// Namespaces confines the principal to these namespaces; empty means
	// every namespace and cluster-scoped objects. A controller carries
	// its owner's scope here.
	Namespaces []string
	// Owner is the object a controller writes children for
	// ("HelmRelease/shop/web"); set only for RoleController.
	Owner string
	// Self is the node a node agent speaks for, the cluster a bridge
	// observes, or, for a controller without Owner, the controller
	// credential it runs under (jetplane creds create --role controller):
	// it records the status and the end of objects of that credential's
	// kinds (Target.Controller).
	Self string
}

// Admin is an unconfined admin principal named name (jetplane's own
// writes, and tests).
func Admin(name string) Principal { return Principal{Name: name, Role: RoleAdmin} }

// Confined reports whether p is limited to some namespaces.
func (p Principal) Confined() bool { return len(p.Namespaces) > 0 }

func (p Principal) inScope(ns string) bool {
	return !p.Confined() || (ns != "" && slices.Contains(p.Namespaces, ns))
}

// Verb is what a principal asks to do.
type Verb string

const (
	VerbRead        Verb = "read"
	VerbApply       Verb = "apply"
	VerbDelete      Verb = "delete"
	VerbObserve     Verb = "observe"
	VerbPushImage   Verb = "push-image"
	VerbDeleteImage Verb = "delete-image"
	VerbPushChart   Verb = "push-chart"
	VerbShred       Verb = "shred"
	VerbBind        Verb = "bind"
	// VerbFetchChart is a HelmRelease naming a remote chart repository,
	// which the server then fetches from.
	VerbFetchChart Verb = "fetch-chart"
	// VerbStatus records an object's status (a StatusChanged event): a
	// node's report on a pod bound to it, a reconciler's on its object,
	// a lost node's pods marked Unknown or failed.
	VerbStatus Verb = "status"
	// VerbFinalize ends an object's deletion (a Finalized event).
	VerbFinalize Verb = "finalize"
)

// Target is what a verb acts on, as far as authorization looks at it.
type Target struct {
	Kind, Namespace, Name string
	// ClusterScoped is true for objects of cluster-scoped kinds.
	ClusterScoped bool
	// Exists says the object is stored now; Owner is the owner the gate
	// recorded on it (AnnotationOwner) and AllowAdoption what its
	// AnnotationAllowAdoption names.
	Exists        bool
	Owner         string
	AllowAdoption string
	// Image is the image reference (NAME:TAG) or chart name of the image
	// and chart verbs.
	Image string
	// Reads are the namespaces the object will read on its writer's
	// behalf once stored (a Subscription's filter; AllNamespaces for every
	// one): writing it needs the right to read each.
	Reads []string
	// BoundTo is the node a pod is bound to (its spec.nodeName), "" when
	// it is not bound or not a pod.
	BoundTo string
	// Controller is the controller credential that runs the target's
	// kind, "" when none does or jetplane's own reconcilers run it.
	Controller string
	// Deleting says the object's deletion was requested (its goal is
	// Deleted): only then may a controller finalize it.
	Deleting bool
}

// AllNamespaces in Target.Reads stands for every namespace.
const AllNamespaces = "*"

var (
	// ErrForbidden marks a write the principal may not make (HTTP 403).
	ErrForbidden = errors.New("forbidden")
	// ErrAdoption marks a controller's write over an object its owner did
	// not create and may not adopt (HTTP 409; a condition on the owner).
	ErrAdoption = errors.New("object owned by someone else")
)

type denied struct {
	msg string
	is  error
}

func (e *denied) Error() string        { return e.msg }
func (e *denied) Is(target error) bool { return target == e.is }

func forbid(p Principal, format string, args ...any) error {
	return &denied{msg: p.Name + " (" + string(p.Role) + ") may not " + fmt.Sprintf(format, args...), is: ErrForbidden}
}

// Authorize decides whether p may do v to t. It is pure: the rules are the
// text scenarios in testdata/authz.
func Authorize(p Principal, v Verb, t Target) error {
	if v == VerbRead {
		if p.Role == "" || !p.inScope(t.Namespace) {
			return forbid(p, "read %s", t.describe())
		}
		return nil
	}
	if p.Role == RoleAdmin && !p.Confined() {
		return nil
	}
	switch p.Role {
	case RoleAdmin:
		// Confined: within its namespaces an admin may what a writer may,
		// and destroy secret data.
		if v == VerbShred {
			return writeScope(p, v, t)
		}
		return writerRules(p, v, t)
	case RoleReader:
		return forbid(p, "%s %s: readers only read", v, t.describe())
	case RoleWriter:
		return writerRules(p, v, t)
	case RoleController:
		if v == VerbFetchChart {
			return writerRules(p, v, t)
		}
		if evicts(p, v, t) {
			return writeScope(p, v, t)
		}
		if v == VerbStatus || v == VerbFinalize {
			// A reconciler records what it did to its own object; a
			// controller credential's process, to objects of its kinds.
			// Either ends an object only once its deletion was asked.
			what := "record the status of"
			if v == VerbFinalize {
				what = "finalize"
			}
			credential := p.Owner == "" && p.Self != ""
			if (p.Owner != "" && p.Owner == t.ref()) || (credential && t.Controller == p.Self) {
				if v == VerbFinalize && !t.Deleting {
					return forbid(p, "finalize %s: its deletion was not requested; a controller finalizes only what was asked to be deleted", t.describe())
				}
				return nil
			}
			if credential {
				run := "no controller runs its kind"
				if t.Controller != "" {
					run = "controller " + t.Controller + " runs its kind"
				}
				return forbid(p, "%s %s: %s; a controller credential records the status and the end of objects of its own kinds only", what, t.describe(), run)
			}
			return forbid(p, "%s %s: a controller records the status and the end of its own object only (%s)", what, t.describe(), p.Owner)
		}
		if p.Owner == "" && p.Self != "" {
			return forbid(p, "%s %s: a controller credential records the status and the end of objects of its own kinds, and writes nothing else", v, t.describe())
		}
		if v != VerbApply && v != VerbDelete {
			return forbid(p, "%s %s", v, t.describe())
		}
		if p.Owner == "" {
			return forbid(p, "%s %s: a controller writes only for an owner", v, t.describe())
		}
		if err := writeScope(p, v, t); err != nil {
			return err
		}
		if t.Exists && t.Owner != p.Owner {
			if v == VerbApply && t.AllowAdoption == p.Owner {
				return nil
			}
			owner := "no owner"
			if t.Owner != "" {
				owner = "owner " + t.Owner
			}
			hint := ""
			if v == VerbApply {
				hint = fmt.Sprintf("; annotate it %s=%s to let %s adopt it, or rename it", AnnotationAllowAdoption, p.Owner, p.Owner)
			}
			return &denied{is: ErrAdoption, msg: fmt.Sprintf("%s exists with %s, not %s%s", t.describe(), owner, p.Owner, hint)}
		}
		return nil
	case RoleNode:
		if v == VerbApply && t.Kind == "Node" && t.ClusterScoped && t.Name == p.Self && t.Namespace == "" {
			return nil
		}
		if v == VerbStatus && t.Kind == podKind && t.Namespace != "" {
			if t.Exists && p.Self != "" && t.BoundTo == p.Self {
				return nil
			}
			bound := "not bound"
			if t.BoundTo != "" {
				bound = "bound to node " + t.BoundTo
			}
			if !t.Exists {
				bound = "absent"
			}
			return forbid(p, "record the status of %s: it is %s; a node reports on the pods bound to it only", t.describe(), bound)
		}
		return forbid(p, "%s %s: a node writes only its own Node and the status of its pods", v, t.describe())
	case RoleScheduler:
		if v == VerbBind && t.Kind == "Pod" && t.Namespace != "" {
			return nil
		}
		return forbid(p, "%s %s: a scheduler only binds pods", v, t.describe())
	case RoleBridge:
		if v == VerbObserve && p.Self != "" && strings.HasPrefix(t.Namespace, p.Self+"/") {
			return nil
		}
		return forbid(p, "%s %s: a bridge records only what its cluster %s holds", v, t.describe(), p.Self)
	}
	return forbid(p, "%s %s: unknown role", v, t.describe())
}

// podKind is the kind pods have in keys.
const podKind = "Pod"

// evicts reports whether v is a lost node's controller failing or
// deleting a pod bound to that node: the controller of Node/N acts on the
// pods bound to N, and on no other.
func evicts(p Principal, v Verb, t Target) bool {
	return (v == VerbStatus || v == VerbDelete) && t.Kind == podKind && t.BoundTo != "" &&
		t.Exists && p.Owner == "Node//"+t.BoundTo
}

// ref is how AnnotationOwner and Principal.Owner name the target.
func (t Target) ref() string { return t.Kind + "/" + t.Namespace + "/" + t.Name }

// writerRules are a writer's: objects within its namespaces; images and
// charts when unconfined, else only images named after its namespaces.
func writerRules(p Principal, v Verb, t Target) error {
	switch v {
	case VerbApply, VerbDelete, VerbStatus:
		// A status write (the status subresource) within its namespaces,
		// as Kubernetes lets whoever may update x/status.
		return writeScope(p, v, t)
	case VerbPushImage, VerbDeleteImage:
		if !p.Confined() {
			return nil
		}
		repo := t.Image
		if i := strings.IndexAny(repo, ":@"); i >= 0 {
			repo = repo[:i]
		}
		for _, ns := range p.Namespaces {
			if strings.HasPrefix(repo, ns+"/") {
				return nil
			}
		}
		return forbid(p, "%s %s: a token confined to namespaces %s may only push and delete images named <namespace>/..., such as %s/%s", v, t.Image,
			strings.Join(p.Namespaces, ","), p.Namespaces[0], repo[strings.LastIndex(repo, "/")+1:])
	case VerbPushChart:
		if !p.Confined() {
			return nil
		}
		return forbid(p, "push chart %s: charts are shared by every namespace; only unconfined writers and admins push them", t.Image)
	case VerbFetchChart:
		// The server would fetch any address it reaches, on the
		// writer's word: confined tokens install pushed charts only.
		if !p.Confined() {
			return nil
		}
		return forbid(p, "install from repository %s: a token confined to namespaces installs pushed charts only (jetplane chart push)", t.Image)
	}
	return forbid(p, "%s %s: only admins may", v, t.describe())
}

// writeScope checks a writer's or controller's namespaces, for the object
// and for what it reads on the writer's behalf.
func writeScope(p Principal, v Verb, t Target) error {
	if !p.inScope(t.Namespace) || (p.Confined() && t.ClusterScoped) {
		return forbid(p, "%s %s: confined to namespaces %s", v, t.describe(), strings.Join(p.Namespaces, ","))
	}
	for _, ns := range t.Reads {
		if ns == AllNamespaces && p.Confined() {
			return forbid(p, "%s %s: it would read every namespace; name spec.filter.namespaces within %s", v, t.describe(), strings.Join(p.Namespaces, ","))
		}
		if ns != AllNamespaces && !p.inScope(ns) {
			return forbid(p, "%s %s: it would read namespace %s; confined to namespaces %s", v, t.describe(), ns, strings.Join(p.Namespaces, ","))
		}
	}
	return nil
}

func (t Target) describe() string {
	switch {
	case t.Kind == "" && t.Image != "":
		return t.Image
	case t.Namespace == "":
		return t.Kind + "/" + t.Name + " (cluster scope)"
	}
	return t.Kind + "/" + t.Namespace + "/" + t.Name
}
