package dtq_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// metricSum sums every series of the named counter family of w.
func metricSum(t *testing.T, w *dtq.Worker, name string) float64 {
	t.Helper()
	mfs, err := w.Gatherer().Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

func TestWorkerMetricsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	w.HandleFunc("bad", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) })
	runWorker(t, w)
	srv := httptest.NewServer(w.MetricsHandler())
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
	for range 3 {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok"})
		require.NoError(t, err)
	}
	bad, err := b.client.Submit(b.ctx, dtq.Submission{Type: "bad"})
	require.NoError(t, err)
	b.waitStatus(t, bad.TaskID, dtqtype.StatusDeadLettered)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), `dtq_tasks_succeeded_total{queue="default",task_type="ok"} 3`)
	}, 10*time.Second, 20*time.Millisecond)
	page := scrape()
	require.Contains(t, page, `dtq_tasks_dead_lettered_total{queue="default",task_type="bad"} 1`)
	require.Contains(t, page, `dtq_task_attempts_total{queue="default",result="success",task_type="ok"} 3`)
	require.Contains(t, page, `dtq_task_execution_seconds_count{queue="default",task_type="ok"} 3`)
	require.Contains(t, page, `dtq_worker_inflight 0`)
	require.NotContains(t, page, bad.TaskID)
}
