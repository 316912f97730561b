package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestManyQueuesAnswer creates 3,000 queues (three batches of 1,000 queues
// each) and checks that the answers that cover queues stay bounded: the
// queue list pages (100 by default), /metrics carries per-queue gauges for
// DTQ_METRICS_MAX_QUEUES queues plus totals, and /stats over all queues
// refuses a window that would read more than its budget. Sizes are
// deterministic and asserted; times are only logged (docs/security.md quotes
// them), since they vary too much on shared machines.
func TestManyQueuesAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var wg sync.WaitGroup
	for batch := range 3 {
		wg.Go(func() {
			var body strings.Builder
			body.WriteString(`{"tasks":[`)
			for i := range 1000 {
				if i > 0 {
					body.WriteString(",")
				}
				fmt.Fprintf(&body, `{"task_type":"echo","queue":"q%d-%04d"}`, batch, i)
			}
			body.WriteString("]}")
			res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", body.String())
			require.Equal(t, http.StatusOK, res.status)
		})
	}
	wg.Wait()

	get := func(path string, status int) *response {
		start := time.Now()
		res := b.do(t, http.MethodGet, path, "")
		require.Equal(t, status, res.status, "%s: %s", path, res.body)
		t.Logf("GET %s with 3000 queues: %d bytes in %s", path, len(res.body), time.Since(start).Round(time.Millisecond))
		return res
	}

	var first queueListJSON
	res := get("/api/v1/queues", http.StatusOK)
	res.decode(t, &first)
	require.Len(t, first.Items, 100)
	require.NotNil(t, first.NextCursor)
	require.Equal(t, 3000, first.Totals.Queues)
	require.EqualValues(t, 3000, first.Totals.Depth)
	require.Less(t, len(res.body), 40_000, "the first page of 100 queues")

	// The whole list, a thousand at a time: every queue once.
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 3, "3,000 queues fit in three pages of 1,000")
		var l queueListJSON
		path := "/api/v1/queues?limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		res := get(path, http.StatusOK)
		res.decode(t, &l)
		require.Less(t, len(res.body), 350_000, "a page of 1,000 queues")
		for _, qi := range l.Items {
			require.False(t, seen[qi.Name], qi.Name)
			seen[qi.Name] = true
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	require.Len(t, seen, 3000)

	res = get("/metrics", http.StatusOK)
	page := string(res.body)
	require.Less(t, len(res.body), 60_000, "per-queue gauges for 100 queues, totals for all")
	require.Equal(t, 100, strings.Count(page, "\ndtq_queue_depth{"))
	require.Equal(t, 3000.0, metricValue(t, page, "dtq_queues_registered"))
	require.Equal(t, 2900.0, metricValue(t, page, "dtq_metrics_queues_omitted"))
	require.Equal(t, 3000.0, metricValue(t, page, "dtq_all_queues_depth"))

	// Over all queues, 3,000 queues × 120 minutes is beyond the budget of
	// 50,000 per-minute records; the answer names the longest window that
	// fits, and that window is served.
	e := get("/api/v1/stats?window=2h", http.StatusBadRequest).requireError(t, http.StatusBadRequest, codeInvalidRequest, "window")
	require.Contains(t, e.Message, "at most 16m")
	res = get("/api/v1/stats?window=16m", http.StatusOK)
	require.Less(t, len(res.body), 10_000)
	get("/api/v1/stats?window=2h&queue=q1-0500", http.StatusOK)
}
