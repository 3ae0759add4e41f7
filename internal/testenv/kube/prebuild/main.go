//go:build unix

// Command prebuild builds the kube-apiserver, etcd and kubectl that
// internal/testenv/kube runs and puts them in its cache, so that tests start
// them in seconds. scripts/test runs it before the tests.
package main

import (
	"context"
	"log"
	"time"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("prebuild: ")
	start := time.Now()
	bins, err := kubeenv.EnsureBinaries(context.Background(), log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("kube-apiserver %s", bins.APIServer)
	log.Printf("etcd %s", bins.Etcd)
	kubectl, err := kubeenv.EnsureKubectl(context.Background(), log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("kubectl %s", kubectl)
	log.Printf("ready in %s", time.Since(start).Round(time.Second))
}
