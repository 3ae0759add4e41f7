package kubeapi

import "sync"

// ringCache keeps the values of the last n keys put; the oldest key is
// replaced first, and a key put again keeps its first value. Safe for
// concurrent use.
type ringCache[K comparable, V any] struct {
	mu   sync.Mutex
	m    map[K]V
	ring []K // insertion order
	next int
	hits int // gets that found their key
}

func newRingCache[K comparable, V any](n int) *ringCache[K, V] {
	return &ringCache[K, V]{m: make(map[K]V, n), ring: make([]K, 0, n)}
}

func (c *ringCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if ok {
		c.hits++
	}
	return v, ok
}

func (c *ringCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.ring) < cap(c.ring) {
		c.ring = append(c.ring, k)
	} else {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
	}
	c.m[k] = v
}

// getByBytes is c.get(string(k)) without making the string.
func getByBytes[V any](c *ringCache[string, V], k []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(k)]
	if ok {
		c.hits++
	}
	return v, ok
}
