package httpapi

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// TestScalingAPI reads the autoscaling signal through the API: arrivals
// counted by the submissions' clock, the never-0 rules, the scoped
// multi-queue read and the refusals of bad input.
func TestScalingAPI(t *testing.T) {
	t.Parallel()
	// A clock the test moves: a whole minute plus 1s, so the submissions
	// fall in the minute's first five-second slot.
	base := time.Now().Truncate(time.Minute).Add(time.Second)
	var offset atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	b := setup(t, options{deployment: func(c *dtq.DeploymentConfig) { c.Clock = clock }})

	for range 30 {
		b.submit(t, dtq.Submission{Type: "echo", Queue: "web"})
	}
	b.submit(t, dtq.Submission{Type: "echo", Queue: "web", Delay: 30 * time.Second})
	b.submit(t, dtq.Submission{Type: "echo", Queue: "web", Delay: time.Hour})
	_, err := b.admin.CreateQueue(b.ctx, "empty", nil)
	require.NoError(t, err)
	_, err = b.admin.CreateQueue(b.ctx, "served", nil)
	require.NoError(t, err)
	offset.Store(int64(10 * time.Second)) // two slots on: the submissions' slot is whole
	// The worker beats at the moved clock, so it is live at it.
	b.startWorker(t, map[string]int{"served": 1}, nil) // Concurrency 4

	var web dtqtype.QueueScaling
	res := b.do(t, http.MethodGet, "/api/v1/queues/web/scaling?concurrency=2", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res.decode(t, &web)
	require.Equal(t, "web", web.Queue)
	require.EqualValues(t, 30, web.Ready)
	require.EqualValues(t, 1, web.DueSoon)
	require.Zero(t, web.Running)
	require.Zero(t, web.Held)
	require.InDelta(t, 1.0, web.ArrivalRate, 1e-9, "30 tasks over the 30s window")
	require.Zero(t, web.ServiceTimeMeanMS, "nothing ran yet")
	require.Equal(t, 2, web.PerWorkerConcurrency, "no worker serves web: the parameter")
	require.EqualValues(t, 1, web.DesiredWorkers, "tasks are ready: never 0")

	var empty dtqtype.QueueScaling
	b.do(t, http.MethodGet, "/api/v1/queues/empty/scaling", "").decode(t, &empty)
	require.Zero(t, empty.DesiredWorkers, "nothing to do and never did")
	require.Equal(t, dtq.DefaultScalingConcurrency, empty.PerWorkerConcurrency)

	var served dtqtype.QueueScaling
	b.do(t, http.MethodGet, "/api/v1/queues/served/scaling?concurrency=9", "").decode(t, &served)
	require.Equal(t, 4, served.PerWorkerConcurrency, "the live worker of the queue says")

	// A queue paused: its ready tasks are held, and still want a worker.
	_, err = b.admin.PauseQueue(b.ctx, "web", "test")
	require.NoError(t, err)
	var page struct {
		Items []dtqtype.QueueScaling `json:"items"`
	}
	res = b.do(t, http.MethodGet, "/api/v1/scaling?queue=web,empty&idle=0s&drain=10s", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res.decode(t, &page)
	require.Len(t, page.Items, 2)
	require.Equal(t, "web", page.Items[0].Queue)
	require.Zero(t, page.Items[0].Ready)
	require.EqualValues(t, 30, page.Items[0].Held)
	require.EqualValues(t, 1, page.Items[0].DesiredWorkers)
	require.Equal(t, "empty", page.Items[1].Queue)

	// The same signal on the metrics page, at the defaults.
	metrics := string(b.do(t, http.MethodGet, "/metrics", "").body)
	require.Contains(t, metrics, "\ndtq_queue_desired_workers{queue=\"web\"} 1\n")
	require.Contains(t, metrics, "\ndtq_queue_desired_workers{queue=\"empty\"} 0\n")
	require.Contains(t, metrics, "\ndtq_queue_oldest_ready_age_seconds{queue=\"web\"} ")
	require.Contains(t, metrics, "\ndtq_queue_oldest_ready_age_seconds{queue=\"empty\"} 0\n")

	for _, tc := range []struct {
		path, field string
	}{
		{"/api/v1/queues/web/scaling?drain=0s", "drain"},
		{"/api/v1/queues/web/scaling?drain=25h", "drain"},
		{"/api/v1/queues/web/scaling?drain=1500ms", "drain"},
		{"/api/v1/queues/web/scaling?drain=soon", "drain"},
		{"/api/v1/queues/web/scaling?idle=-1s", "idle"},
		{"/api/v1/queues/web/scaling?idle=2h", "idle"},
		{"/api/v1/queues/web/scaling?concurrency=0", "concurrency"},
		{"/api/v1/queues/web/scaling?concurrency=10001", "concurrency"},
		{"/api/v1/queues/web/scaling?window=1m", "window"},
		{"/api/v1/scaling", "queue"},
		{"/api/v1/scaling?queue=,", "queue"},
		{"/api/v1/scaling?queue=web,Bad!", "queue"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			b.do(t, http.MethodGet, tc.path, "").requireError(t, http.StatusBadRequest, "INVALID_REQUEST", tc.field)
		})
	}
	e := b.do(t, http.MethodGet, "/api/v1/queues/nope/scaling", "").requireError(t, http.StatusNotFound, "QUEUE_NOT_FOUND", "")
	require.Contains(t, e.Message, "nope")
	e = b.do(t, http.MethodGet, "/api/v1/scaling?queue=web,nope", "").requireError(t, http.StatusNotFound, "QUEUE_NOT_FOUND", "")
	require.Contains(t, e.Message, `"nope"`)
}
