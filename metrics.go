package dtq

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtq-io/dtq/internal/metrics"
	"github.com/dtq-io/dtq/internal/rdb"
)

// workerMetrics records a worker's Prometheus metrics.
type workerMetrics struct {
	gatherer prometheus.Gatherer
	m        *metrics.Worker
}

func newWorkerMetrics(reg prometheus.Registerer) *workerMetrics {
	wm := &workerMetrics{}
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
		wm.gatherer, reg = r, r
	}
	wm.m = metrics.NewWorker(reg)
	return wm
}

// initSeries creates the counters of the queues and task types served at
// zero (see metrics.Worker.Init).
func (w *workerMetrics) initSeries(queues, taskTypes []string) {
	w.m.Init(queues, taskTypes)
}

func (w *workerMetrics) started(ct *rdb.ClaimedTask, now time.Time) {
	w.m.Started.WithLabelValues(ct.Queue, ct.Type).Inc()
	w.m.Inflight.Inc()
	if ct.Attempt == 1 {
		w.m.Wait.WithLabelValues(ct.Queue).Observe(max(0, now.Sub(time.UnixMilli(ct.CreatedAt)).Seconds()))
	}
}

// finished records one attempt's outcome: succeeded, retrying,
// dead_lettered, failed, cancelled or lease_lost.
func (w *workerMetrics) finished(ct *rdb.ClaimedTask, outcome string, took time.Duration, retryDelay time.Duration, now time.Time) {
	q, t := ct.Queue, ct.Type
	w.m.Inflight.Dec()
	w.m.Execution.WithLabelValues(q, t).Observe(took.Seconds())
	w.m.Attempts.WithLabelValues(q, t, attemptResult(outcome)).Inc()
	switch outcome {
	case "lease_lost":
		w.m.LeaseLost.WithLabelValues(q).Inc()
		return
	case "retrying":
		w.m.Retried.WithLabelValues(q, t).Inc()
		w.m.RetryDelay.WithLabelValues(q).Observe(retryDelay.Seconds())
		return
	case "succeeded":
		w.m.Succeeded.WithLabelValues(q, t).Inc()
	case "dead_lettered":
		w.m.DeadLettered.WithLabelValues(q, t).Inc()
	case "failed":
		w.m.Failed.WithLabelValues(q, t).Inc()
	case "", "handback", "error":
		return
	}
	w.m.Completed.WithLabelValues(q, t, outcome).Inc()
	w.m.EndToEnd.WithLabelValues(q, t).Observe(max(0, now.Sub(time.UnixMilli(ct.CreatedAt)).Seconds()))
}

// MetricsHandler serves the worker's metrics in the Prometheus text format
// (when WorkerConfig.Registerer was nil; otherwise serve your registry).
func (w *Worker) MetricsHandler() http.Handler {
	if w.metrics.gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(w.metrics.gatherer, promhttp.HandlerOpts{})
}

// attemptResult is the result label of dtq_task_attempts_total for an outcome.
func attemptResult(outcome string) string {
	switch outcome {
	case "succeeded":
		return "success"
	case "retrying":
		return "retry"
	case "dead_lettered", "failed":
		return "failure"
	case "cancelled", "lease_lost":
		return outcome
	}
	return "error"
}
