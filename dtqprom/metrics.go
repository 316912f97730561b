package dtqprom

// dtq's Prometheus metrics are defined here, in one place, so that the API
// and the workers export the same names (docs/observability.md). Labels are
// queue, task_type and a small outcome vocabulary — never task ids or
// payloads.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtq-io/dtq/internal/buildinfo"
)

// DurationBuckets are the buckets of every dtq histogram: sub-millisecond to
// ten minutes, in seconds.
var DurationBuckets = prometheus.ExponentialBucketsRange(0.0005, 600, 22)

// workerMetrics holds the metrics a worker process exports.
type workerMetrics struct {
	Started         *prometheus.CounterVec   // queue, task_type
	Succeeded       *prometheus.CounterVec   // queue, task_type
	Failed          *prometheus.CounterVec   // queue, task_type (failed with the DLQ off)
	Retried         *prometheus.CounterVec   // queue, task_type
	DeadLettered    *prometheus.CounterVec   // queue, task_type
	Completed       *prometheus.CounterVec   // queue, task_type, status
	Attempts        *prometheus.CounterVec   // queue, task_type, result
	LeaseLost       *prometheus.CounterVec   // queue
	FinalizeRetries *prometheus.CounterVec   // queue: finalize writes tried again after an error
	Throttled       *prometheus.CounterVec   // queue, reason: starts held back by a flow-control limit
	Inflight        prometheus.Gauge         // handlers running in this worker
	Wait            *prometheus.HistogramVec // queue: created -> started
	Execution       *prometheus.HistogramVec // queue, task_type: one attempt
	EndToEnd        *prometheus.HistogramVec // queue, task_type: created -> finished
	RetryDelay      *prometheus.HistogramVec // queue
}

// newWorkerMetrics creates the worker metrics and registers them with reg.
func newWorkerMetrics(reg prometheus.Registerer) *workerMetrics {
	qt := []string{"queue", "task_type"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: DurationBuckets}, labels)
	}
	m := &workerMetrics{
		Started:         counter("dtq_tasks_started_total", "Attempts started.", qt...),
		Succeeded:       counter("dtq_tasks_succeeded_total", "Tasks that succeeded.", qt...),
		Failed:          counter("dtq_tasks_failed_total", "Tasks that ended failed (DLQ off).", qt...),
		Retried:         counter("dtq_tasks_retried_total", "Attempts that failed and were scheduled for retry.", qt...),
		DeadLettered:    counter("dtq_tasks_dead_lettered_total", "Tasks moved to the dead-letter queue.", qt...),
		Completed:       counter("dtq_tasks_completed_total", "Tasks that reached a terminal status, by status.", "queue", "task_type", "status"),
		Attempts:        counter("dtq_task_attempts_total", "Finished attempts by result (success, retry, failure, cancelled, lease_lost).", "queue", "task_type", "result"),
		LeaseLost:       counter("dtq_lease_lost_total", "Attempts whose lease was lost; their outcome was discarded.", "queue"),
		Throttled:       counter("dtq_tasks_throttled_total", "Starts held back by a flow-control limit: claims a rate or concurrency limit refused, and tasks held on their concurrency key.", "queue", "reason"),
		FinalizeRetries: counter("dtq_finalize_retries_total", "Finalize writes tried again after a Redis error (the outcome was kept and written later).", "queue"),
		Inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_worker_inflight",
			Help: "Handlers running in this worker."}),
		Wait:       hist("dtq_task_wait_seconds", "Time from creation to start of an attempt.", "queue"),
		Execution:  hist("dtq_task_execution_seconds", "Duration of one attempt.", qt...),
		EndToEnd:   hist("dtq_task_end_to_end_seconds", "Time from creation to the terminal status.", qt...),
		RetryDelay: hist("dtq_task_retry_delay_seconds", "Backoff chosen for retries.", "queue"),
	}
	reg.MustRegister(m.Started, m.Succeeded, m.Failed, m.Retried, m.DeadLettered, m.Completed, m.Attempts,
		m.LeaseLost, m.FinalizeRetries, m.Throttled, m.Inflight, m.Wait, m.Execution, m.EndToEnd, m.RetryDelay,
		NewBuildInfo())
	return m
}

// Label vocabularies of the worker counters, as Worker.Serving creates them.
var (
	// CompletedStatuses are the status labels of dtq_tasks_completed_total.
	CompletedStatuses = []string{"succeeded", "failed", "dead_lettered", "cancelled"}
	// AttemptResults are the result labels of dtq_task_attempts_total.
	AttemptResults = []string{"success", "retry", "failure", "cancelled", "lease_lost", "error"}
	// ThrottleReasons are the reason labels of dtq_tasks_throttled_total.
	ThrottleReasons = []string{"rate", "concurrency", "key_concurrency", "key_rate"}
)

// Init creates every counter series of queues and task types at zero, so
// that a rate or increase over a counter has data before its first event
// and an alert on it is evaluated rather than absent. Histograms and the
// gauge are left alone.
func (m *workerMetrics) Init(queues, taskTypes []string) {
	for _, q := range queues {
		m.LeaseLost.WithLabelValues(q)
		m.FinalizeRetries.WithLabelValues(q)
		for _, r := range ThrottleReasons {
			m.Throttled.WithLabelValues(q, r)
		}
		for _, t := range taskTypes {
			for _, c := range []*prometheus.CounterVec{m.Started, m.Succeeded, m.Failed, m.Retried, m.DeadLettered} {
				c.WithLabelValues(q, t)
			}
			for _, s := range CompletedStatuses {
				m.Completed.WithLabelValues(q, t, s)
			}
			for _, r := range AttemptResults {
				m.Attempts.WithLabelValues(q, t, r)
			}
		}
	}
}

// NewBuildInfo returns dtq_build_info: a gauge of 1 labelled with the
// running build's version, revision and Go version.
func NewBuildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_build_info",
		Help: "Always 1; the labels say which build of dtq runs: version, revision and goversion.",
		ConstLabels: prometheus.Labels{
			"version": buildinfo.Version(), "revision": buildinfo.Revision(), "goversion": buildinfo.GoVersion(),
		}})
	g.Set(1)
	return g
}

// API holds the metrics dtq's HTTP API process exports besides the queue
// gauges (docs/observability.md): submissions, refusals by reason, request
// durations and the configured queue depth limit. The dtq binary records
// them; they are public so that their names and labels are defined once.
type API struct {
	Submitted *prometheus.CounterVec   // queue
	Rejected  *prometheus.CounterVec   // reason
	Requests  *prometheus.HistogramVec // route, code
	// MaxDepth is DTQ_MAX_QUEUE_DEPTH, so that alerts compare depths with
	// the configured limit rather than a copy of it.
	MaxDepth prometheus.Gauge
}

// RejectReasons are the reason labels of dtq_tasks_rejected_total; NewAPI
// creates each at zero.
var RejectReasons = []string{"invalid", "too_large", "unknown_type", "queue_full", "in_progress", "key_mismatch", "redis_oom"}

// NewAPI creates the API metrics, and dtq_build_info, and registers them
// with reg; it panics if reg already holds them.
func NewAPI(reg prometheus.Registerer) *API {
	m := &API{
		Submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dtq_tasks_submitted_total",
			Help: "Tasks created by submissions (replays not counted)."}, []string{"queue"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dtq_tasks_rejected_total",
			Help: "Submissions refused, by reason (invalid, too_large, unknown_type, queue_full, in_progress, key_mismatch, redis_oom)."}, []string{"reason"}),
		Requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dtq_http_request_duration_seconds",
			Help: "HTTP API request durations.", Buckets: DurationBuckets}, []string{"route", "code"}),
		MaxDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dtq_queue_max_depth",
			Help: "Live tasks a queue may hold before submissions get 429 (DTQ_MAX_QUEUE_DEPTH)."}),
	}
	for _, r := range RejectReasons {
		m.Rejected.WithLabelValues(r)
	}
	reg.MustRegister(m.Submitted, m.Rejected, m.Requests, m.MaxDepth, NewBuildInfo())
	return m
}
