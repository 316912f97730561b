package httpapi

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// metricValue finds the value of one series in a Prometheus text page.
func metricValue(t *testing.T, page, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestMetricsMoveWithSubmissions(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	before := b.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, before.status)

	for range 3 {
		require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"metered"}`).status)
	}
	require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"metered"}`, "Idempotency-Key", "m1").status)
	require.Equal(t, http.StatusConflict, b.post(t, `{"task_type":"echo","queue":"metered"}`, "Idempotency-Key", "m1").status)
	require.Equal(t, http.StatusBadRequest, b.post(t, `{"task_type":"bad type"}`).status)

	after := b.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, after.status)
	page := string(after.body)
	require.Equal(t, 4.0, metricValue(t, page, `dtq_tasks_submitted_total{queue="metered"}`))
	require.Equal(t, 1.0, metricValue(t, page, `dtq_tasks_rejected_total{reason="in_progress"}`))
	require.Equal(t, 1.0, metricValue(t, page, `dtq_tasks_rejected_total{reason="invalid"}`))
	require.Equal(t, 4.0, metricValue(t, page, `dtq_queue_depth{queue="metered"}`))
	require.Equal(t, 4.0, metricValue(t, page, `dtq_queue_ready{queue="metered"}`))
	require.Equal(t, 1.0, metricValue(t, page, `dtq_redis_up`))
	require.Equal(t, float64(DefaultMaxQueueDepth), metricValue(t, page, `dtq_queue_max_depth`))
	require.Contains(t, page, `dtq_tasks_rejected_total{reason="redis_oom"} 0`, "every reason starts at zero")
	require.Regexp(t, `(?m)^dtq_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1$`, page)
	require.NotContains(t, page, "task_id")
}

// TestMetricsQueueBound checks DTQ_METRICS_MAX_QUEUES: per-queue gauges for
// the deepest queues only (ties by dead letters, then name), totals over all,
// and the submission counter's later queues under queue="_other".
func TestMetricsQueueBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		max    int
		listed []string
	}{
		{"two deepest", 2, []string{"deep", "mid-a"}},
		{"all fit", 10, []string{"deep", "mid-a", "mid-b", "shallow"}},
		{"totals only", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{metricsMaxQueues: tt.max})
			for q, n := range map[string]int{"deep": 5, "mid-a": 2, "mid-b": 2, "shallow": 1} {
				for range n {
					require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"`+q+`"}`).status)
				}
			}
			res := b.do(t, http.MethodGet, "/metrics", "")
			require.Equal(t, http.StatusOK, res.status)
			page := string(res.body)
			var listed []string
			for _, q := range []string{"deep", "mid-a", "mid-b", "shallow"} {
				if strings.Contains(page, `dtq_queue_depth{queue="`+q+`"}`) {
					listed = append(listed, q)
				}
			}
			require.Equal(t, tt.listed, listed)
			require.Equal(t, 4.0, metricValue(t, page, "dtq_queues_registered"))
			require.Equal(t, float64(4-len(tt.listed)), metricValue(t, page, "dtq_metrics_queues_omitted"))
			require.Equal(t, 10.0, metricValue(t, page, "dtq_all_queues_depth"))
			if len(tt.listed) > 0 {
				require.Equal(t, 5.0, metricValue(t, page, `dtq_queue_ready{queue="deep"}`))
			}
			// Submission counters: the first max queues seen get a label.
			labelled := strings.Count(page, "\ndtq_tasks_submitted_total{queue=\"") -
				strings.Count(page, `dtq_tasks_submitted_total{queue="_other"}`)
			require.Equal(t, min(max(tt.max, 0), 4), labelled)
			if tt.max < 4 {
				require.Greater(t, metricValue(t, page, `dtq_tasks_submitted_total{queue="_other"}`), 0.0)
			}
		})
	}
}
