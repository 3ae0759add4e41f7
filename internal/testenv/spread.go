package testenv

import (
	"sync"
	"sync/atomic"
)

// Spread calls f(i) for every i in [0, n) from workers goroutines at once,
// each taking the next i when its call returns, as a load of concurrent
// clients does. The first error stops the others taking more and is
// returned once every call in flight has returned.
func Spread(n, workers int, f func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
