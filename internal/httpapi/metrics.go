package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/metrics"
)

// apiMetrics are the API process's metrics: submission counters plus queue
// and worker gauges computed at scrape time from counters and structure
// sizes (never by scanning tasks).
type apiMetrics struct {
	m       *metrics.API
	handler http.Handler
}

func newAPIMetrics(reg *prometheus.Registry, in *dtq.Inspector, feed EventFeed) *apiMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	reg.MustRegister(&queueCollector{in: in})
	if sc, ok := feed.(subscriberCounter); ok {
		reg.MustRegister(&subscriberCollector{feed: sc})
	}
	return &apiMetrics{m: metrics.NewAPI(reg), handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
}

// observeSubmit counts one submission's outcome.
func (am *apiMetrics) observeSubmit(res *dtq.SubmitResult, err error) {
	switch {
	case err == nil && !res.Duplicate:
		am.m.Submitted.WithLabelValues(res.Task.Queue).Inc()
	case err == nil:
	case errors.Is(err, dtq.ErrPayloadTooLarge):
		am.m.Rejected.WithLabelValues("too_large").Inc()
	case errors.Is(err, dtq.ErrUnknownTaskType):
		am.m.Rejected.WithLabelValues("unknown_type").Inc()
	case errors.Is(err, dtq.ErrInvalidTask), errors.Is(err, dtq.ErrInvalidJSON):
		am.m.Rejected.WithLabelValues("invalid").Inc()
	case errors.Is(err, dtq.ErrQueueFull):
		am.m.Rejected.WithLabelValues("queue_full").Inc()
	case errors.Is(err, dtq.ErrIdempotencyInProgress):
		am.m.Rejected.WithLabelValues("in_progress").Inc()
	case errors.Is(err, dtq.ErrIdempotencyKeyMismatch):
		am.m.Rejected.WithLabelValues("key_mismatch").Inc()
	}
}

// metricsPage is GET /metrics (Prometheus text format).
func (s *Server) metricsPage(w http.ResponseWriter, r *http.Request) {
	s.metrics.handler.ServeHTTP(w, r)
}

var (
	descDepth     = prometheus.NewDesc("dtq_queue_depth", "Live tasks in the queue (the depth gate's counter).", []string{"queue"}, nil)
	descReady     = prometheus.NewDesc("dtq_queue_ready", "Queued tasks not yet delivered.", []string{"queue"}, nil)
	descPending   = prometheus.NewDesc("dtq_queue_pending", "Delivered, unacknowledged stream entries (running tasks).", []string{"queue"}, nil)
	descScheduled = prometheus.NewDesc("dtq_queue_scheduled", "Delayed and retrying tasks.", []string{"queue"}, nil)
	descDLQ       = prometheus.NewDesc("dtq_queue_dlq", "Entries in the dead-letter queue.", []string{"queue"}, nil)
	descPaused    = prometheus.NewDesc("dtq_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil)
	descWorkers   = prometheus.NewDesc("dtq_workers_active", "Workers with a recent heartbeat.", nil, nil)
	descUp        = prometheus.NewDesc("dtq_redis_up", "1 when the last scrape could read Redis.", nil, nil)
)

// queueCollector reads queue and worker state at scrape time.
type queueCollector struct{ in *dtq.Inspector }

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descReady, descPending, descScheduled, descDLQ, descPaused, descWorkers, descUp} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	queues, err := c.in.ListQueues(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, q := range queues {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, q.Name)
		}
		g(descDepth, float64(q.Depth))
		g(descReady, float64(q.ReadyTotal))
		g(descPending, float64(q.Pending))
		g(descScheduled, float64(q.Scheduled))
		g(descDLQ, float64(q.DLQ))
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		g(descPaused, paused)
	}
	workers, err := c.in.ListWorkers(ctx)
	if err == nil {
		live := 0
		for _, w := range workers {
			if w.Live {
				live++
			}
		}
		ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(live))
	}
}

var (
	descSubscribers = prometheus.NewDesc("dtq_api_event_subscribers",
		"Open event feed clients (SSE and WebSocket) of this API process.", nil, nil)
	descSubscribersRefused = prometheus.NewDesc("dtq_api_event_subscribers_refused_total",
		"Event feed clients refused with 503 because DTQ_MAX_SUBSCRIBERS were open.", nil, nil)
)

// subscriberCollector exports the event feed's client counts.
type subscriberCollector struct{ feed subscriberCounter }

func (c *subscriberCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSubscribers
	ch <- descSubscribersRefused
}

func (c *subscriberCollector) Collect(ch chan<- prometheus.Metric) {
	open, refused := c.feed.SubscriberCounts()
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(descSubscribersRefused, prometheus.CounterValue, float64(refused))
}
