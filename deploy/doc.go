// Package deploy holds what installs jetplane on Kubernetes: the Helm
// chart in chart/jetplane (one process with embedded NATS, three forming a
// JetStream cluster, or N against an outside NATS), the container image
// script (scripts/image) and examples. Its tests render the chart with
// helm's own library and dry-run every object against a real apiserver.
package deploy
