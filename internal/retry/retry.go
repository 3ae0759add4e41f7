// Package retry is the one way jetplane's long-running parts try a call
// again: a pause that grows from First to Max between attempts, cut short
// when the context ends. It owns no goroutines and reads no clock of its
// own beyond the timer it waits on.
package retry

import (
	"context"
	"errors"
	"time"
)

// Backoff says how long to pause between attempts. Zero fields take the
// defaults: First 100 ms, Max 10 × First, Factor 2 (1 keeps the pause
// constant).
type Backoff struct {
	First  time.Duration
	Max    time.Duration
	Factor float64
}

func (b Backoff) withDefaults() Backoff {
	if b.First <= 0 {
		b.First = 100 * time.Millisecond
	}
	if b.Max < b.First {
		b.Max = 10 * b.First
	}
	if b.Factor < 1 {
		b.Factor = 2
	}
	return b
}

// Pause is the pause after failed attempt n (n >= 1).
func (b Backoff) Pause(n int) time.Duration {
	b = b.withDefaults()
	d := float64(b.First)
	for i := 1; i < n && d < float64(b.Max); i++ {
		d *= b.Factor
	}
	return min(time.Duration(d), b.Max)
}

// Constant is a Backoff that always pauses d.
func Constant(d time.Duration) Backoff { return Backoff{First: d, Max: d, Factor: 1} }

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth another attempt: Do returns it (the
// wrapped error) at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// Do calls fn until it succeeds, returns an error marked Permanent, or ctx
// ends; attempt counts from 1. Between attempts it pauses as b says,
// returning as soon as ctx ends. notify, when not nil, hears of every
// failed attempt that will be tried again, with the pause before the next.
// Do returns nil, the permanent error, or (ctx having ended) ctx's error
// joined with the last attempt's.
func Do(ctx context.Context, b Backoff, notify func(attempt int, err error, next time.Duration), fn func(attempt int) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(attempt)
		if err == nil {
			return nil
		}
		if p, ok := errors.AsType[permanent](err); ok {
			return p.err
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		next := b.Pause(attempt)
		if notify != nil {
			notify(attempt, err, next)
		}
		if !Sleep(ctx, next) {
			return errors.Join(ctx.Err(), err)
		}
	}
}

// Sleep pauses for d, or until ctx ends; it reports whether the full pause
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Often reports whether attempt is worth a log line: the first and every
// tenth, so that a long outage is visible without flooding the log.
func Often(attempt int) bool { return attempt == 1 || attempt%10 == 0 }
