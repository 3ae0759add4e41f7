// Package pod runs jetplane's Pod kind: the reconciler instances run for
// every Pod (placement, the work item its node's agent reads, deletion),
// the service that turns agents' reports into StatusChanged events, and
// the node agent itself, which drives each pod bound to its node through a
// typed state machine (states.go, graph in docs/pods.md) and runs its
// containers as WebAssembly (WASI) modules on wazero.
//
// The machine's handlers reach the world only through Env, so every
// transition is tested as a function of a fake one. Only this package and
// scheduler/wasm import wazero; the agent reaches NATS only through
// events.NodeConn, which confines it to its node's names.
package pod
