package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqprom"
	"github.com/dtq-io/dtq/dtqtype"
)

// apiMetrics are the API process's metrics: submission counters plus queue
// and worker gauges computed at scrape time from counters and structure
// sizes (never by scanning tasks).
type apiMetrics struct {
	m       *dtqprom.API
	handler http.Handler

	// The submission counter is labelled by queue for the first maxQueues
	// queues this process sees; later ones count under otherQueues, so the
	// page stays bounded however many queues producers use.
	maxQueues int
	mu        sync.Mutex
	labelled  map[string]struct{}
}

// otherQueues is the queue label of submissions to queues beyond
// DTQ_METRICS_MAX_QUEUES. It cannot be a queue's name: names start with a
// letter or digit.
const otherQueues = "_other"

// queueLabel is the queue label the submission counter uses for q.
func (am *apiMetrics) queueLabel(q string) string {
	am.mu.Lock()
	defer am.mu.Unlock()
	if _, ok := am.labelled[q]; ok {
		return q
	}
	if len(am.labelled) >= am.maxQueues {
		return otherQueues
	}
	am.labelled[q] = struct{}{}
	return q
}

func newAPIMetrics(reg *prometheus.Registry, in *dtq.Inspector, feed EventFeed, maxQueues int, maxDepth int64) *apiMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	reg.MustRegister(&queueCollector{in: in, max: maxQueues})
	if sc, ok := feed.(subscriberCounter); ok {
		reg.MustRegister(&subscriberCollector{feed: sc})
	}
	m := dtqprom.NewAPI(reg)
	m.MaxDepth.Set(float64(maxDepth))
	return &apiMetrics{m: m, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		maxQueues: maxQueues, labelled: map[string]struct{}{}}
}

// observeSubmit counts one submission's outcome.
func (am *apiMetrics) observeSubmit(res *dtq.SubmitResult, err error) {
	switch {
	case err == nil && !res.Duplicate && res.Deduplicated == "":
		am.m.Submitted.WithLabelValues(am.queueLabel(res.Task.Queue)).Inc()
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
	case redis.IsOOMError(err):
		am.m.Rejected.WithLabelValues("redis_oom").Inc()
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
	descRetained  = prometheus.NewDesc("dtq_retained_tasks",
		"Finished tasks kept until their retention ends, by status (dead letters in the DLQ are in dtq_queue_dlq).",
		[]string{"queue", "status"}, nil)
	descMemUsed     = prometheus.NewDesc("dtq_redis_used_memory_bytes", "Redis used_memory (summed over a Cluster's masters).", nil, nil)
	descMemMax      = prometheus.NewDesc("dtq_redis_maxmemory_bytes", "Redis maxmemory (summed over a Cluster's masters); 0 = none set.", nil, nil)
	descSumRetained = prometheus.NewDesc("dtq_all_queues_retained", "Finished tasks kept, over all queues.", nil, nil)
	descDedup       = prometheus.NewDesc("dtq_tasks_deduplicated_total",
		"Deduplicated submissions by mode: collapsed into their key's task (drop, throttle, debounce), or queued tasks a newer submission cancelled (replace, keep_last).",
		[]string{"queue", "mode"}, nil)

	descDesired = prometheus.NewDesc("dtq_queue_desired_workers",
		"Workers the queue wants (docs/autoscaling.md), with the signal's defaults: drain 60s, idle 300s, 16 slots a worker unless its live workers say.",
		[]string{"queue"}, nil)
	descOldestReady = prometheus.NewDesc("dtq_queue_oldest_ready_age_seconds", "How long the queue's oldest ready task has waited; 0 when none waits.", []string{"queue"}, nil)

	descQueues        = prometheus.NewDesc("dtq_queues_registered", "Queues in the registry.", nil, nil)
	descQueuesOmitted = prometheus.NewDesc("dtq_metrics_queues_omitted", "Registered queues without per-queue gauges here (beyond DTQ_METRICS_MAX_QUEUES).", nil, nil)
	descSumDepth      = prometheus.NewDesc("dtq_all_queues_depth", "Live tasks over all queues.", nil, nil)
	descSumRunning    = prometheus.NewDesc("dtq_all_queues_running", "Leased (running) tasks over all queues.", nil, nil)
	descSumScheduled  = prometheus.NewDesc("dtq_all_queues_scheduled", "Delayed and retrying tasks over all queues.", nil, nil)
	descSumDLQ        = prometheus.NewDesc("dtq_all_queues_dlq", "Dead-letter entries over all queues.", nil, nil)
	descSumPaused     = prometheus.NewDesc("dtq_all_queues_paused", "Paused queues.", nil, nil)
)

// queueCollector reads queue and worker state at scrape time. The totals
// cover every queue with five commands each; the per-queue gauges, which
// also read the band streams, cover at most max queues, so a registry of
// thousands of queues neither floods the scraper nor slows the scrape.
type queueCollector struct {
	in  *dtq.Inspector
	max int
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descReady, descPending, descScheduled, descDLQ, descPaused, descWorkers, descUp,
		descQueues, descQueuesOmitted, descSumDepth, descSumRunning, descSumScheduled, descSumDLQ, descSumPaused,
		descRetained, descMemUsed, descMemMax, descSumRetained, descDedup, descDesired, descOldestReady} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	listed, total, err := c.queues(ctx)
	if err != nil {
		gauge(descUp, 0)
		return
	}
	gauge(descUp, 1)
	gauge(descQueues, float64(total.Queues))
	gauge(descQueuesOmitted, float64(total.Queues-len(listed)))
	gauge(descSumDepth, float64(total.Depth))
	gauge(descSumRunning, float64(total.Running))
	gauge(descSumScheduled, float64(total.Scheduled))
	gauge(descSumDLQ, float64(total.DLQ))
	gauge(descSumPaused, float64(total.Paused))
	gauge(descSumRetained, float64(total.Retained))
	if m, err := c.in.RedisMemory(ctx); err == nil && m != nil {
		gauge(descMemUsed, float64(m.UsedBytes))
		gauge(descMemMax, float64(m.MaxBytes))
	}
	for _, q := range listed {
		gauge(descDepth, float64(q.Depth), q.Name)
		gauge(descReady, float64(q.ReadyTotal), q.Name)
		gauge(descPending, float64(q.Pending), q.Name)
		gauge(descScheduled, float64(q.Scheduled), q.Name)
		gauge(descDLQ, float64(q.DLQ), q.Name)
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		gauge(descPaused, paused, q.Name)
		for status, n := range q.Retained {
			gauge(descRetained, float64(n), q.Name, status)
		}
		for mode, n := range q.Deduplicated {
			ch <- prometheus.MustNewConstMetric(descDedup, prometheus.CounterValue, float64(n), q.Name, mode)
		}
	}
	c.scaling(ctx, listed, gauge)
	workers, err := allWorkers(ctx, c.in)
	if err == nil {
		live := 0
		for _, w := range workers {
			if w.Live {
				live++
			}
		}
		gauge(descWorkers, float64(live))
	}
}

// scaling exports the autoscaling signal of the listed queues, as many at
// a time as one Inspector.Scaling call reads. A batch that fails (a queue
// deleted since it was listed) goes without these gauges this scrape.
func (c *queueCollector) scaling(ctx context.Context, listed []*dtqtype.QueueInfo, gauge func(*prometheus.Desc, float64, ...string)) {
	for batch := range slices.Chunk(listed, dtq.MaxScalingQueues) {
		names := make([]string, len(batch))
		for i, q := range batch {
			names[i] = q.Name
		}
		sigs, err := c.in.Scaling(ctx, names, nil)
		if err != nil {
			continue
		}
		for _, sg := range sigs {
			gauge(descDesired, float64(sg.DesiredWorkers), sg.Queue)
			gauge(descOldestReady, float64(sg.OldestReadyAgeMS)/1000, sg.Queue)
		}
	}
}

// queues returns the queues that get per-queue gauges, by name, and the
// totals over all of them. The chosen ones are the max deepest, ties broken
// by more dead letters, then by name, so the choice is deterministic.
func (c *queueCollector) queues(ctx context.Context) ([]*dtqtype.QueueInfo, dtqtype.QueueTotals, error) {
	var total dtqtype.QueueTotals
	sizes, err := c.in.QueueSizes(ctx, nil)
	if err != nil {
		return nil, total, err
	}
	for _, s := range sizes {
		total.Add(s)
	}
	if len(sizes) > c.max {
		slices.SortFunc(sizes, func(a, b dtqtype.QueueSize) int {
			return cmp.Or(cmp.Compare(b.Depth, a.Depth), cmp.Compare(b.DLQ, a.DLQ), strings.Compare(a.Name, b.Name))
		})
		sizes = sizes[:c.max]
	}
	chosen := make([]string, len(sizes))
	for i, s := range sizes {
		chosen[i] = s.Name
	}
	if len(chosen) == 0 {
		return nil, total, nil
	}
	listed, err := listAll(ctx, func(ctx context.Context, cursor string) (*dtqtype.ListResult[*dtqtype.QueueInfo], error) {
		return c.in.ListQueues(ctx, &dtq.QueueListParams{Only: chosen, Cursor: cursor, Limit: dtqtype.MaxListLimit})
	})
	return listed, total, err
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
