package dtqprom_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqprom"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestWorkerMetricsOverHTTP runs a worker whose Observer is a dtqprom.Worker
// and reads its metrics as Prometheus scrapes them: counters at zero for
// every queue and task type served, then the outcomes, never a task id.
func TestWorkerMetricsOverHTTP(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	w, err := d.NewWorker(&dtq.WorkerConfig{Observer: dtqprom.NewWorker(reg),
		DisableScheduler: true, HeartbeatInterval: time.Second, VisibilityTimeout: 3 * time.Second,
		DrainTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	w.HandleFunc("bad", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) })
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	c, err := d.NewClient(nil)
	require.NoError(t, err)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scrape := func() string {
		res, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return string(body)
	}
	// Counters start at zero for every queue served and task type handled.
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), `dtq_tasks_succeeded_total{queue="default",task_type="ok"} 0`)
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, scrape(), `dtq_tasks_dead_lettered_total{queue="default",task_type="ok"} 0`)
	require.Contains(t, scrape(), `dtq_lease_lost_total{queue="default"} 0`)
	require.Contains(t, scrape(), `dtq_build_info{`)
	for range 3 {
		_, err := c.Submit(ctx, dtq.Submission{Type: "ok"})
		require.NoError(t, err)
	}
	bad, err := c.Submit(ctx, dtq.Submission{Type: "bad"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		page := scrape()
		return strings.Contains(page, `dtq_tasks_succeeded_total{queue="default",task_type="ok"} 3`) &&
			strings.Contains(page, `dtq_tasks_dead_lettered_total{queue="default",task_type="bad"} 1`)
	}, 10*time.Second, 20*time.Millisecond)
	page := scrape()
	require.Contains(t, page, `dtq_task_attempts_total{queue="default",result="success",task_type="ok"} 3`)
	require.Contains(t, page, `dtq_task_execution_seconds_count{queue="default",task_type="ok"} 3`)
	require.Contains(t, page, `dtq_tasks_completed_total{queue="default",status="dead_lettered",task_type="bad"} 1`)
	require.Contains(t, page, `dtq_worker_inflight 0`)
	require.NotContains(t, page, bad.TaskID)
}
