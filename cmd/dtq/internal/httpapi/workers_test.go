package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

func TestWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.do(t, http.MethodGet, "/api/v1/workers", "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"items":[],"next_cursor":null}`, string(res.body))

	w := b.startWorker(t, map[string]int{"ops": 2}, handlers{
		"echo": func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil },
	})
	var l struct {
		Items      []dtqtype.WorkerInfo `json:"items"`
		NextCursor *string              `json:"next_cursor"`
	}
	b.do(t, http.MethodGet, "/api/v1/workers", "").decode(t, &l)
	require.Nil(t, l.NextCursor)
	require.Len(t, l.Items, 1)
	require.Equal(t, w.ID(), l.Items[0].ID)
	require.True(t, l.Items[0].Live)
	require.Equal(t, []string{"ops:2"}, l.Items[0].Queues)

	var wi dtqtype.WorkerInfo
	res = b.do(t, http.MethodGet, "/api/v1/workers/"+w.ID(), "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &wi)
	require.Equal(t, w.ID(), wi.ID)
	require.Equal(t, 4, wi.Concurrency)
	require.NotNil(t, wi.InFlight)

	// A worker serving the queue counts as live in its QueueInfo.
	b.submit(t, dtq.Submission{Type: "echo", Queue: "ops"})
	var qi dtqtype.QueueInfo
	b.do(t, http.MethodGet, "/api/v1/queues/ops", "").decode(t, &qi)
	require.Equal(t, 1, qi.LiveWorkers)

	b.do(t, http.MethodGet, "/api/v1/workers/nobody", "").requireError(t, http.StatusNotFound, codeWorkerNotFound, "")
	b.do(t, http.MethodGet, "/api/v1/workers?live=1", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "live")
}

type statsJSON struct {
	Items []dtqtype.MinuteStats `json:"items"`
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.startWorker(t, map[string]int{"ops": 1, "other": 1}, handlers{
		"echo": func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil },
	})
	var ids []string
	for i := range 5 {
		ids = append(ids, b.submit(t, dtq.Submission{Type: "echo", Queue: []string{"ops", "other"}[i%2]}))
	}
	for _, id := range ids {
		b.waitStatus(t, id, dtqtype.StatusSucceeded)
	}

	sum := func(query string, want int) int64 {
		t.Helper()
		res := b.do(t, http.MethodGet, "/api/v1/stats?"+query, "")
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var s statsJSON
		res.decode(t, &s)
		require.Len(t, s.Items, want)
		var n int64
		for i, m := range s.Items {
			if i > 0 {
				require.Equal(t, time.Minute, m.Minute.Sub(s.Items[i-1].Minute.Time), "oldest minute first")
			}
			n += m.Succeeded
		}
		return n
	}
	require.EqualValues(t, 3, sum("queue=ops&window=5m", 5))
	require.EqualValues(t, 2, sum("queue=other&window=10", 10))
	require.EqualValues(t, 5, sum("", 15))
	require.EqualValues(t, 5, sum("window=2h", 120))
	require.EqualValues(t, 0, sum("queue=never-used&window=1m", 1))

	for _, tc := range []struct{ query, field string }{
		{"window=0", "window"},
		{"window=30s", "window"},
		{"window=90s", "window"},
		{"window=121", "window"},
		{"window=3h", "window"},
		{"window=soon", "window"},
		{"queue=Bad_Queue", "queue"},
		{"queues=ops", "queues"},
	} {
		b.do(t, http.MethodGet, "/api/v1/stats?"+tc.query, "").requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 15 * time.Minute, true},
		{"15m", 15 * time.Minute, true},
		{"1m", time.Minute, true},
		{"2h", 2 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"60s", time.Minute, true},
		{"15", 15 * time.Minute, true},
		{"120", 2 * time.Hour, true},
		{"1", time.Minute, true},
		{"0", 0, false},
		{"121", 0, false},
		{"-5", 0, false},
		{"59s", 0, false},
		{"90s", 0, false},
		{"2h1m", 0, false},
		{"1.5", 0, false},
		{"15 m", 0, false},
		{"99999999999999999999", 0, false},
	} {
		got, err := parseWindow(tc.in)
		if !tc.ok {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}
