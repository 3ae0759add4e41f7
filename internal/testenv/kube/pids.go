//go:build unix

package kubeenv

// PIDs returns the process ids of etcd and kube-apiserver (while it runs),
// for benchmarks that count the CPU time the Kubernetes stack spends.
func (e *Env) PIDs() []int {
	var pids []int
	for _, p := range []*process{e.etcd, e.apiserver} {
		if p != nil && p.cmd.Process != nil {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}
