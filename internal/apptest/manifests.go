package apptest

import (
	"encoding/json"
	"fmt"
)

// Deployment is the manifest of the Deployment web in namespace ns:
// replicas pods labelled app=web, rolled out one pod over and one under
// at a time, each with one container, web, running image with args.
func Deployment(ns string, replicas int, image string, args ...string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: %s, args: %s}
`, ns, replicas, image, a)
}
