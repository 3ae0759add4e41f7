package reconcilers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetplane/jetplane/reconcilers/queue"
)

// Metrics are the runtime's per-kind Prometheus metrics.
type Metrics struct {
	depth     *prometheus.GaugeVec
	runs      *prometheus.CounterVec
	errors    *prometheus.CounterVec
	retries   *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	latency   *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 20)
	m := &Metrics{
		depth:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jetplane_reconcile_queue_depth", Help: "Keys waiting to run, by kind."}, []string{"kind"}),
		runs:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetplane_reconcile_runs_total", Help: "Reconcile runs, by kind."}, []string{"kind"}),
		errors:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetplane_reconcile_errors_total", Help: "Runs that failed (terminal or not), by kind."}, []string{"kind"}),
		retries:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetplane_reconcile_retries_total", Help: "Retries scheduled with backoff, by kind."}, []string{"kind"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetplane_reconcile_conflicts_total", Help: "Status writes that lost an optimistic-concurrency race, by kind."}, []string{"kind"}),
		duration:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jetplane_reconcile_run_seconds", Help: "Run duration, by kind.", Buckets: buckets}, []string{"kind"}),
		latency:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jetplane_reconcile_event_to_done_seconds", Help: "From an event's time to the end of the run that covered it, by kind.", Buckets: buckets}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.depth, m.runs, m.errors, m.retries, m.conflicts, m.duration, m.latency)
	}
	return m
}

func (m *Metrics) observe(kind string, o queue.Outcome, took time.Duration, covered []delivered) {
	m.runs.WithLabelValues(kind).Inc()
	m.duration.WithLabelValues(kind).Observe(took.Seconds())
	switch o {
	case queue.Failed:
		m.errors.WithLabelValues(kind).Inc()
		m.retries.WithLabelValues(kind).Inc()
	case queue.FailedTerminal:
		m.errors.WithLabelValues(kind).Inc()
	}
	now := time.Now()
	if len(covered) == 0 {
		return
	}
	latency := m.latency.WithLabelValues(kind)
	for _, d := range covered {
		if !d.at.IsZero() {
			latency.Observe(now.Sub(d.at).Seconds())
		}
	}
}
