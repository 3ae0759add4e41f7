package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// cloud is a small simulated cloud API: resources are files in a
// directory that every replica of the controller shares, each naming the
// resource it sits on. Calls take a random latency, fail at a given rate,
// and record each change in ops.log. A call on a resource that another
// call is making at that moment is recorded as OVERLAP: the runtime must
// never let that happen.
type cloud struct {
	dir      string
	failRate float64
	latency  time.Duration
}

func newCloud(dir string, failRate float64, latency time.Duration) (*cloud, error) {
	for _, d := range []string{"res", "locks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &cloud{dir: dir, failRate: failRate, latency: latency}, nil
}

func file(id string) string { return strings.ReplaceAll(id, "/", "_") }

// call runs fn on resource id as the cloud would: slowly, sometimes
// failing, and never twice at once without saying so.
func (c *cloud) call(op, id string, fn func() error) error {
	lock, err := os.OpenFile(filepath.Join(c.dir, "locks", file(id)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		c.record("OVERLAP " + id)
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
	}
	time.Sleep(c.latency/2 + rand.N(c.latency+1))
	if rand.Float64() < c.failRate {
		return fmt.Errorf("cloud: %s %s: 503 service unavailable, try again", op, id)
	}
	if err := fn(); err != nil {
		return err
	}
	c.record(op + " " + id)
	return nil
}

// create makes id on parent (which must exist), or finds it made.
func (c *cloud) create(id, parent string) error {
	return c.call("create", id, func() error {
		if parent != "" {
			if _, err := os.Stat(filepath.Join(c.dir, "res", file(parent))); err != nil {
				return fmt.Errorf("cloud: create %s: %s does not exist", id, parent)
			}
		}
		return os.WriteFile(filepath.Join(c.dir, "res", file(id)), []byte(parent), 0o644)
	})
}

// remove deletes id, refusing while anything sits on it.
func (c *cloud) remove(id string) error {
	return c.call("delete", id, func() error {
		entries, err := os.ReadDir(filepath.Join(c.dir, "res"))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if b, _ := os.ReadFile(filepath.Join(c.dir, "res", e.Name())); string(b) == id {
				return fmt.Errorf("cloud: delete %s: %s still uses it", id, e.Name())
			}
		}
		err = os.Remove(filepath.Join(c.dir, "res", file(id)))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
}

func (c *cloud) record(line string) {
	f, err := os.OpenFile(filepath.Join(c.dir, "ops.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
}
