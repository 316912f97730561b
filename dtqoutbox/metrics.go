package dtqoutbox

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a relay's Prometheus metrics (docs/outbox.md): register them
// once per process and share them between the process's relays.
type Metrics struct {
	pending, failed, oldest, window prometheus.Gauge
	relayedTotal, unknownTotal      prometheus.Counter
	errorsTotal                     *prometheus.CounterVec
}

// NewMetrics creates the relay metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_outbox_pending",
			Help: "Outbox rows not yet submitted (neither sent nor failed)."}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_outbox_failed",
			Help: "Outbox rows that will not be submitted (invalid, or outcome unknown past the idempotency window): they need a person."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_outbox_oldest_pending_seconds",
			Help: "Age of the oldest outbox row not yet submitted (0 when none)."}),
		window: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_outbox_idempotency_window_seconds",
			Help: "The idempotency TTL the relay works within: a row pending longer is at risk."}),
		relayedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "dtq_outbox_relayed_total",
			Help: "Outbox rows submitted and marked sent."}),
		unknownTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "dtq_outbox_unknown_total",
			Help: "Outbox rows ended failed because their outcome was unknown past the idempotency window."}),
		errorsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dtq_outbox_errors_total",
			Help: "Relay errors by kind: database (a pass failed), submit (a row to retry), invalid (a row refused for good)."},
			[]string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.pending, m.failed, m.oldest, m.window, m.relayedTotal, m.unknownTotal, m.errorsTotal} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"database", "submit", "invalid"} {
		m.errorsTotal.WithLabelValues(k)
	}
	return m, nil
}

// The update methods do nothing on a nil *Metrics.

func (m *Metrics) relayed(n int) {
	if m != nil {
		m.relayedTotal.Add(float64(n))
	}
}

func (m *Metrics) error(kind string) {
	if m != nil {
		m.errorsTotal.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) unknown(n int) {
	if m != nil {
		m.unknownTotal.Add(float64(n))
	}
}

func (m *Metrics) gauges(pending, failed int64, oldest float64, window time.Duration) {
	if m != nil {
		m.pending.Set(float64(pending))
		m.failed.Set(float64(failed))
		m.oldest.Set(oldest)
		m.window.Set(window.Seconds())
	}
}
