package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one token may take from the server. They apply to
// tokens only: without tokens the API is a loopback development server.
type Limits struct {
	// Rate is the requests per second one token may make on average
	// (default 100; negative: unlimited), Burst how many it may make at
	// once (default 2×Rate). Over it, requests get 429 with Retry-After.
	Rate  float64
	Burst int
	// Watches is how many watches one token may hold open at once
	// (default 32; negative: unlimited). Over it, a watch gets 429.
	Watches int
	// PageSize is the page size of list and history when the request
	// gives no limit (default 1000), MaxPageSize the largest limit a
	// request may ask (default 10000).
	PageSize, MaxPageSize int
	// PageBytes ends a history page early once its events hold this many
	// bytes encoded (default 4 MiB; at least one event per page).
	PageBytes int
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound how long a
	// client may take to send a request's headers (default 10 s), its
	// whole request (default 5 min: an image push is large), and how long
	// a kept-alive connection may sit idle (default 2 min). WriteTimeout
	// bounds writing an answer (default 5 min); watches, followed logs and
	// backups are exempt, being long by design.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout, WriteTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.Rate == 0 {
		l.Rate = 100
	}
	if l.Burst == 0 {
		l.Burst = int(math.Max(1, 2*l.Rate))
	}
	if l.Watches == 0 {
		l.Watches = 32
	}
	if l.PageSize == 0 {
		l.PageSize = 1000
	}
	if l.MaxPageSize == 0 {
		l.MaxPageSize = 10000
	}
	if l.PageBytes == 0 {
		l.PageBytes = 4 << 20
	}
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = 5 * time.Minute
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = 2 * time.Minute
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = 5 * time.Minute
	}
	if l.PageSize > l.MaxPageSize {
		l.PageSize = l.MaxPageSize
	}
	return l
}

// limiter holds each token's request budget and open watches.
type limiter struct {
	cfg     Limits
	mu      sync.Mutex
	buckets map[*Principal]*rate.Limiter
	watches map[*Principal]int
}

func newLimiter(cfg Limits) *limiter {
	return &limiter{cfg: cfg, buckets: map[*Principal]*rate.Limiter{}, watches: map[*Principal]int{}}
}

// limited is a 429 with the time to wait.
type limited struct {
	msg        string
	retryAfter time.Duration
}

func (e *limited) Error() string { return e.msg }

// admit spends one request of p's budget, and for a watch one of its
// watch slots (release gives it back); a refusal is a *limited.
func (l *limiter) admit(p *Principal, watch bool) (release func(), err error) {
	if p == anonymous {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Rate > 0 {
		b := l.buckets[p]
		if b == nil {
			b = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
			l.buckets[p] = b
		}
		now := time.Now()
		r := b.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			return nil, &limited{msg: fmt.Sprintf("%s is over its request rate (%g/s); retry after %s", p.Name, l.cfg.Rate, d.Round(time.Millisecond)), retryAfter: d}
		}
	}
	if !watch || l.cfg.Watches < 0 {
		return func() {}, nil
	}
	if l.watches[p] >= l.cfg.Watches {
		return nil, &limited{msg: fmt.Sprintf("%s holds %d watches, its limit; close one first", p.Name, l.watches[p]), retryAfter: time.Second}
	}
	l.watches[p]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.watches[p]--
			l.mu.Unlock()
		})
	}, nil
}

// writeLimited answers a refusal: 429, Retry-After in whole seconds
// (at least 1), and the JSON error.
func writeLimited(w http.ResponseWriter, e *limited) error {
	secs := int(math.Ceil(e.retryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return httpError(http.StatusTooManyRequests, e.msg)
}

// ConfigureServer sets hs's timeouts from the limits and makes its
// Shutdown end every open stream (watches, followed logs) at once: they
// would otherwise hold the shutdown until their clients leave.
func (s *Server) ConfigureServer(hs *http.Server) {
	hs.ReadHeaderTimeout = s.limitsCfg.ReadHeaderTimeout
	hs.ReadTimeout = s.limitsCfg.ReadTimeout
	hs.IdleTimeout = s.limitsCfg.IdleTimeout
	hs.WriteTimeout = s.limitsCfg.WriteTimeout
	hs.RegisterOnShutdown(s.closeStreams)
}

// stream marks the request as a long stream: exempt from the read and
// write timeouts, and ended when the server shuts down. The returned context ends
// then or with the request; release frees it.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (context.Context, func()) {
	// The read deadline too: the server's background read of a request
	// past its deadline would cancel the stream.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.streams, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// MaxIdempotencyKey bounds an Idempotency-Key header.
const MaxIdempotencyKey = 128

// idempotencyKey is the request's Idempotency-Key: at most
// MaxIdempotencyKey characters of letters, digits and -_.:+/= (a UUID, a
// ULID, base64), or a 400 saying so.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > MaxIdempotencyKey {
		return "", httpError(http.StatusBadRequest, fmt.Sprintf("Idempotency-Key: %d characters, at most %d (a UUID is 36)", len(k), MaxIdempotencyKey))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:+/=", c) >= 0) {
			return "", httpError(http.StatusBadRequest, fmt.Sprintf("Idempotency-Key: character %d (%q) is not allowed; use letters, digits and -_.:+/= (at most %d)", i+1, c, MaxIdempotencyKey))
		}
	}
	return k, nil
}
