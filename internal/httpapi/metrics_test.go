package httpapi

import (
	"net/http"
	"regexp"
	"strconv"
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
	require.NotContains(t, page, "task_id")
}
