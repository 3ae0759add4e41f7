package gate

import (
	"fmt"

	"github.com/jetplane/jetplane/schemas"
)

// podTemplates are the kinds (apiVersion and kind) whose spec.template is
// a pod template: their pods get what the template asks for.
var podTemplates = map[[2]string]bool{
	{"apps/v1", "Deployment"}: true, {"apps/v1", "ReplicaSet"}: true, {"apps/v1", "DaemonSet"}: true,
	{"apps/v1", "StatefulSet"}: true, {"batch/v1", "Job"}: true,
}

// Warnings says what o asks for that jetplane accepts but cannot give, one
// sentence per field (decision 0053). The gate returns them with every
// write's outcome (Outcome.Warnings), so every writer hears them: the HTTP
// apply, the Kubernetes API, a chart's or a workload's children. A pod's
// container ports are the case, in a Pod or a workload's pod template:
// pods run as WebAssembly (WASI) modules, which have no network, so
// nothing can listen on a port.
func Warnings(o *schemas.Object) []string {
	spec, path := o.GetSpec().GetFields(), "spec"
	switch {
	case o.GetKind() == "Pod" && o.GetApiVersion() == "v1":
	case podTemplates[[2]string{o.GetApiVersion(), o.GetKind()}]:
		spec, path = spec["template"].GetStructValue().GetFields()["spec"].GetStructValue().GetFields(), "spec.template.spec"
	default:
		return nil
	}
	var out []string
	for _, list := range []string{"initContainers", "containers"} {
		for i, c := range spec[list].GetListValue().GetValues() {
			if len(c.GetStructValue().GetFields()["ports"].GetListValue().GetValues()) == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s/%s: %s.%s[%d].ports: nothing will listen: jetplane runs containers as WebAssembly (WASI) modules, which have no network (a server in one fails, a Go one with \"all goroutines are asleep\")",
				o.GetKind(), o.GetMetadata().GetNamespace(), o.GetMetadata().GetName(), path, list, i))
		}
	}
	return out
}
