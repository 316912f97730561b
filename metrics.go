package dtq

import "github.com/prometheus/client_golang/prometheus"

// workerMetrics are a worker's Prometheus metrics. Labels never carry task
// ids or payloads.
type workerMetrics struct {
	gatherer   prometheus.Gatherer
	startedC   *prometheus.CounterVec
	finishedC  *prometheus.CounterVec
	leaseLostC *prometheus.CounterVec
}

func newWorkerMetrics(reg prometheus.Registerer) *workerMetrics {
	m := &workerMetrics{
		startedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dtq_worker_tasks_started_total", Help: "Attempts started by this worker.",
		}, []string{"queue"}),
		finishedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dtq_worker_tasks_finished_total", Help: "Attempts finalized by this worker, by outcome.",
		}, []string{"queue", "outcome"}),
		leaseLostC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dtq_lease_lost_total", Help: "Attempts whose lease was lost, so their outcome was discarded.",
		}, []string{"queue"}),
	}
	if reg == nil {
		r := prometheus.NewRegistry()
		m.gatherer, reg = r, r
	}
	reg.MustRegister(m.startedC, m.finishedC, m.leaseLostC)
	return m
}

func (m *workerMetrics) started(q string)           { m.startedC.WithLabelValues(q).Inc() }
func (m *workerMetrics) finished(q, outcome string) { m.finishedC.WithLabelValues(q, outcome).Inc() }
func (m *workerMetrics) leaseLost(q string)         { m.leaseLostC.WithLabelValues(q).Inc() }
