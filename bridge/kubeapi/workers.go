package kubeapi

import (
	"log"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// A request's handler runs on the goroutine net/http starts for it, whose
// stack starts small: a write through the gate and the log grows it
// several times, and each growth copies the stack and walks its frames
// (7–8% of the server under a burst of writes). workers runs requests on
// goroutines kept between them, whose stacks have grown already; the
// request's own goroutine waits. A worker idle for workerIdle ends.
type workers struct {
	tasks chan *task // unbuffered: a send succeeds when a worker waits
}

type task struct {
	f     func()
	done  chan struct{} // one value when f has returned
	panic any           // what f panicked with, raised again by run
	stack []byte        // the worker's stack at the panic (not for ErrAbortHandler)
}

const workerIdle = 10 * time.Second

var tasks = sync.Pool{New: func() any { return &task{done: make(chan struct{}, 1)} }}

func newWorkers() *workers { return &workers{tasks: make(chan *task)} }

// run calls f on a worker and returns when f has: as calling f itself, a
// panic included.
func (p *workers) run(f func()) {
	t := tasks.Get().(*task)
	t.f = f
	select {
	case p.tasks <- t:
	default:
		go p.work(t)
	}
	<-t.done
	v := t.panic
	t.f, t.panic = nil, nil
	tasks.Put(t)
	if v != nil {
		if st := t.stack; st != nil {
			// net/http logs the stack of this goroutine; the handler's
			// frames were on the worker's.
			log.Printf("kubeapi: handler panicked: %v\n%s", v, st)
		}
		panic(v)
	}
}

func (p *workers) work(t *task) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		t.call()
		idle.Reset(workerIdle)
		select {
		case t = <-p.tasks:
		case <-idle.C:
			return
		}
	}
}

func (t *task) call() {
	defer func() {
		t.panic, t.stack = recover(), nil
		if t.panic != nil && t.panic != http.ErrAbortHandler {
			t.stack = debug.Stack()
		}
		t.done <- struct{}{}
	}()
	t.f()
}
