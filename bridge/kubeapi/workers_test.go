package kubeapi

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestWorkersRunEachCallOnce(t *testing.T) {
	p := newWorkers()
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				ran := false
				p.run(func() { ran = true; n.Add(1) })
				if !ran {
					t.Error("run returned before its function did")
				}
			}
		}()
	}
	wg.Wait()
	if n.Load() != 64*100 {
		t.Fatalf("%d calls ran, want %d", n.Load(), 64*100)
	}
}

// A panic reaches the request's goroutine, as if the handler ran there
// (net/http recovers it and ends the request), and the worker goes on.
func TestWorkersRaisePanicsInTheCaller(t *testing.T) {
	p := newWorkers()
	for range 3 {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want boom", r)
				}
			}()
			p.run(func() { panic("boom") })
			t.Fatal("run returned after its function panicked")
		}()
		ran := false
		p.run(func() { ran = true })
		if !ran {
			t.Fatal("a worker did not run the next call after a panic")
		}
	}
}
