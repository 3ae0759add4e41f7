package gate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/internal/scenario"
	"github.com/jetplane/jetplane/schemas/kinds"
)

// TestAuthorizeScenarios replays testdata/authz/*.txt: the gate's rules as
// principal × action × target → outcome. One command:
//
//	authorize ROLE [ns=A,B] [owner=KIND/NS/NAME] [self=NAME] [name=ACTOR] VERB TARGET [exists] [owned-by=KIND/NS/NAME] [allow=KIND/NS/NAME] [bound=NODE] [run-by=CONTROLLER] [deleting]
//
// TARGET is KIND/NS/NAME (NS empty for cluster scope, whose kinds come
// from package kinds) or, for image and chart verbs, the ref. It prints
// ok, or the refusal's class (forbidden, conflict) and message.
// `go test ./bridge/gate -run Scenarios -args -rewrite` updates the files.
func TestAuthorizeScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/authz/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			scenario.Run(t, f, authorizeCmd)
		})
	}
}

func authorizeCmd(t *testing.T, c scenario.Cmd) string {
	if c.Name != "authorize" {
		c.Fatalf(t, "unknown command")
	}
	if len(c.Args) < 3 {
		c.Fatalf(t, "want ROLE ... VERB TARGET")
	}
	p := gate.Principal{Role: gate.Role(c.Args[0])}
	args := c.Args[1:]
	for len(args) > 0 && strings.Contains(args[0], "=") {
		k, v, _ := strings.Cut(args[0], "=")
		switch k {
		case "ns":
			p.Namespaces = strings.Split(v, ",")
		case "owner":
			p.Owner = v
		case "self":
			p.Self = v
		case "name":
			p.Name = v
		default:
			c.Fatalf(t, "unknown principal field %q", k)
		}
		args = args[1:]
	}
	if p.Name == "" {
		p.Name = map[gate.Role]string{
			gate.RoleNode: "node/" + p.Self, gate.RoleBridge: "bridge/" + p.Self, gate.RoleController: "reconciler/HelmRelease", gate.RoleScheduler: "scheduler",
		}[p.Role]
	}
	if p.Name == "" {
		p.Name = "user/" + string(p.Role)
	}
	if len(args) < 2 {
		c.Fatalf(t, "want VERB TARGET")
	}
	v := gate.Verb(args[0])
	var tg gate.Target
	switch v {
	case gate.VerbPushImage, gate.VerbDeleteImage, gate.VerbPushChart, gate.VerbFetchChart:
		tg.Image = args[1]
	default:
		parts := strings.Split(args[1], "/")
		if len(parts) < 3 {
			c.Fatalf(t, "target %q: want KIND/NS/NAME", args[1])
		}
		// An observed namespace holds its cluster: "east/shop".
		tg.Kind, tg.Namespace, tg.Name = parts[0], strings.Join(parts[1:len(parts)-1], "/"), parts[len(parts)-1]
		tg.ClusterScoped = !kinds.Lookup(tg.Kind).Namespaced
	}
	for _, a := range args[2:] {
		k, val, _ := strings.Cut(a, "=")
		switch k {
		case "exists":
			tg.Exists = true
		case "owned-by":
			tg.Exists, tg.Owner = true, val
		case "allow":
			tg.AllowAdoption = val
		case "reads":
			tg.Reads = strings.Split(val, ",")
		case "bound":
			tg.BoundTo = val
		case "run-by":
			tg.Controller = val
		case "deleting":
			tg.Exists, tg.Deleting = true, true
		default:
			c.Fatalf(t, "unknown target field %q", k)
		}
	}
	err := gate.Authorize(p, v, tg)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, gate.ErrAdoption):
		return "conflict: " + err.Error()
	case errors.Is(err, gate.ErrForbidden):
		return "forbidden: " + err.Error()
	}
	return "error: " + err.Error()
}
