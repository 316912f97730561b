// Package dtqprom records a dtq.Worker's metrics in Prometheus: a
// dtq.Observer that the dtq binary wires into its workers. A program that
// runs its own Worker uses it the same way:
//
//	reg := prometheus.NewRegistry()
//	w, err := d.NewWorker(&dtq.WorkerConfig{Observer: dtqprom.NewWorker(reg)}) // d from dtq.Open
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metric names and labels are listed in docs/observability.md. The
// dtq package itself does not import Prometheus.
package dtqprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtq-io/dtq"
)

// Worker is a dtq.Observer that records a worker's metrics: started,
// succeeded, failed, retried, dead-lettered and completed counters by queue
// and task type, attempts by result, lease losses, finalize retries,
// throttled starts, handlers in flight, and histograms of wait, execution,
// end-to-end time and retry delay. It is safe for concurrent use.
type Worker struct {
	m *workerMetrics
}

// NewWorker creates the worker metrics and registers them (and
// dtq_build_info) with reg; it panics if reg already holds them.
func NewWorker(reg prometheus.Registerer) *Worker {
	return &Worker{m: newWorkerMetrics(reg)}
}

var _ dtq.Observer = (*Worker)(nil)

// Serving creates every counter of queues and task types at zero, so that
// alerts on their rates have data before the first event.
func (w *Worker) Serving(queues, taskTypes []string) { w.m.Init(queues, taskTypes) }

// TaskStarted counts a start and, on a first attempt, its wait.
func (w *Worker) TaskStarted(s dtq.TaskStart) {
	w.m.Started.WithLabelValues(s.Queue, s.Type).Inc()
	w.m.Inflight.Inc()
	if s.Attempt == 1 {
		w.m.Wait.WithLabelValues(s.Queue).Observe(max(0, s.Waited.Seconds()))
	}
}

// TaskFinished records one attempt's outcome.
func (w *Worker) TaskFinished(e dtq.TaskEnd) {
	q, t := e.Queue, e.Type
	w.m.Inflight.Dec()
	w.m.Execution.WithLabelValues(q, t).Observe(e.Took.Seconds())
	w.m.Attempts.WithLabelValues(q, t, attemptResult(e.Outcome)).Inc()
	switch e.Outcome {
	case "lease_lost":
		w.m.LeaseLost.WithLabelValues(q).Inc()
		return
	case "retrying":
		w.m.Retried.WithLabelValues(q, t).Inc()
		w.m.RetryDelay.WithLabelValues(q).Observe(e.RetryDelay.Seconds())
		return
	case "succeeded":
		w.m.Succeeded.WithLabelValues(q, t).Inc()
	case "dead_lettered":
		w.m.DeadLettered.WithLabelValues(q, t).Inc()
	case "failed":
		w.m.Failed.WithLabelValues(q, t).Inc()
	case "cancelled":
	default: // handback, error: the task has not ended
		return
	}
	w.m.Completed.WithLabelValues(q, t, e.Outcome).Inc()
	w.m.EndToEnd.WithLabelValues(q, t).Observe(max(0, e.SinceCreated.Seconds()))
}

// Throttled counts starts a flow-control limit held back.
func (w *Worker) Throttled(queue, reason string, n int) {
	w.m.Throttled.WithLabelValues(queue, reason).Add(float64(n))
}

// FinalizeRetried counts an outcome written again after a Redis error.
func (w *Worker) FinalizeRetried(queue string) { w.m.FinalizeRetries.WithLabelValues(queue).Inc() }

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
