package node_test

import (
	"testing"
	"time"

	"github.com/jetplane/jetplane/reconcilers/node"
)

func TestJudge(t *testing.T) {
	const grace, eviction = 40 * time.Second, 5 * time.Minute
	tests := []struct {
		name         string
		age          time.Duration
		ready, evict bool
		recheck      time.Duration
	}{
		{"never beat", -1, false, false, 10 * time.Second},
		{"fresh", 0, true, false, 40 * time.Second},
		{"late but in grace", 39 * time.Second, true, false, time.Second},
		{"grace over", 40 * time.Second, false, false, 10 * time.Second},
		{"almost lost", grace + eviction - time.Second, false, false, time.Second},
		{"lost", grace + eviction, false, true, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := node.Judge(tt.age, grace, eviction)
			if v.Ready != tt.ready || v.Evict != tt.evict || v.Recheck != tt.recheck {
				t.Fatalf("Judge(%s) = %+v", tt.age, v)
			}
			if !v.Ready && v.Message == "" {
				t.Fatal("a node that is not Ready needs a reason")
			}
		})
	}
}
