package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestUnservedQueueWarning submits to a queue no worker serves: the task
// is accepted (202) with a Dtq-Warning header and one log line, however
// many tasks follow; once a worker serves the queue the warning stops.
func TestUnservedQueueWarning(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.api.served.ttl = 50 * time.Millisecond

	for i := range 3 {
		res := b.post(t, fmt.Sprintf(`{"queue": "emails", "task_type": "send_receipt", "payload": {"n": %d}}`, i))
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		require.Equal(t, []string{`no live worker serves queue "emails"`}, res.header.Values(WarningHeader))
	}
	require.Equal(t, 1, strings.Count(b.logs.String(), "no live worker serves"), b.logs.String())
	require.Contains(t, b.logs.String(), `"queue":"emails"`)

	// A batch warns once per unserved queue that got a new task.
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch",
		`{"tasks": [{"queue": "emails", "task_type": "a"}, {"queue": "sms", "task_type": "a"}, {"queue": "sms", "task_type": "b"}]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, []string{`no live worker serves 2 queues: "emails", "sms"`}, res.header.Values(WarningHeader))

	// GET /queues says the same.
	var list struct {
		Items []struct {
			Queue       string `json:"queue"`
			LiveWorkers int    `json:"live_workers"`
			Unserved    bool   `json:"unserved"`
		} `json:"items"`
	}
	getQueues(t, b, &list)
	require.NotEmpty(t, list.Items)
	for _, q := range list.Items {
		require.True(t, q.Unserved, q.Queue)
		require.Zero(t, q.LiveWorkers, q.Queue)
	}

	b.startWorker(t, map[string]int{"emails": 1}, handlers{"send_receipt": func(context.Context, *dtq.Task) (any, error) { return nil, nil }})
	require.Eventually(t, func() bool {
		res := b.post(t, `{"queue": "emails", "task_type": "send_receipt"}`)
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		return len(res.header.Values(WarningHeader)) == 0
	}, 10*time.Second, 20*time.Millisecond, "the warning never stopped once a worker served the queue")
	getQueues(t, b, &list)
	for _, q := range list.Items {
		require.Equal(t, q.Queue != "emails", q.Unserved, q.Queue)
		if q.Queue == "emails" {
			require.Equal(t, 1, q.LiveWorkers)
		}
	}
}

// TestUnservedWarningBounded sends a batch to 1000 unserved queues: every
// task is accepted and the answer carries one bounded Dtq-Warning header
// (clients refuse answers with more than about 100 headers) and one
// bounded log line.
func TestUnservedWarningBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var tasks []string
	for i := range 1000 {
		tasks = append(tasks, fmt.Sprintf(`{"queue": "q%04d", "task_type": "a"}`, i))
	}
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks": [`+strings.Join(tasks, ",")+`]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	got := res.header.Values(WarningHeader)
	require.Len(t, got, 1)
	require.LessOrEqual(t, len(got[0]), 512)
	require.True(t, strings.HasPrefix(got[0], `no live worker serves 1000 queues: "q0000", "q0001", `), got[0])
	require.Regexp(t, ` and [0-9]+ more$`, got[0])
	logs := b.logs.String()
	require.Equal(t, 1, strings.Count(logs, "no live worker serves"), logs)
	require.Contains(t, logs, `"count":1000`)
	require.Less(t, len(logs), 4096, "the warning log line is bounded")
}

// TestUnservedWarningText checks the warning's wording and bound.
func TestUnservedWarningText(t *testing.T) {
	t.Parallel()
	many := func(n int) []string {
		var qs []string
		for i := range n {
			qs = append(qs, fmt.Sprintf("queue-with-a-long-name-%02d", i))
		}
		return qs
	}
	tests := []struct {
		queues []string
		want   string
	}{
		{[]string{"emails"}, `no live worker serves queue "emails"`},
		{[]string{"a", "b"}, `no live worker serves 2 queues: "a", "b"`},
		{many(3), `no live worker serves 3 queues: "queue-with-a-long-name-00", "queue-with-a-long-name-01", "queue-with-a-long-name-02"`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, unservedWarning(tt.queues))
	}
	for _, n := range []int{10, 17, 18, 19, 20, 99, 1000} {
		got := unservedWarning(many(n))
		require.LessOrEqual(t, len(got), maxWarningLen, "n=%d", n)
		named := strings.Count(got, `"`) / 2
		if named < n {
			require.True(t, strings.HasSuffix(got, fmt.Sprintf(" and %d more", n-named)), "n=%d: %s", n, got)
		}
	}
}

func getQueues(t *testing.T, b *bundle, v any) {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/queues", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.NoError(t, json.Unmarshal(res.body, v))
}

// TestServedQueuesCache checks the cache's rules without Redis: one read
// per ttl, concurrent callers share it, a failed read claims nothing.
func TestServedQueuesCache(t *testing.T) {
	t.Parallel()
	reads := 0
	var fail bool
	c := &servedQueues{ttl: time.Hour, read: func(context.Context) (map[string]bool, error) {
		reads++
		if fail {
			return nil, errors.New("down")
		}
		return map[string]bool{"default": true}, nil
	}}
	ctx := context.Background()
	tests := []struct {
		queue             string
		unserved, known   bool
		reads             int
		expire, failsNext bool
	}{
		{queue: "default", unserved: false, known: true, reads: 1},
		{queue: "emails", unserved: true, known: true, reads: 1},
		{queue: "emails", unserved: true, known: true, reads: 2, expire: true},
		{queue: "emails", unserved: false, known: false, reads: 3, expire: true, failsNext: true},
		{queue: "default", unserved: false, known: false, reads: 3},
	}
	for i, tt := range tests {
		if tt.expire {
			c.readAt = time.Time{}
		}
		fail = tt.failsNext
		u, k := c.unserved(ctx, tt.queue)
		require.Equal(t, tt.unserved, u, "step %d", i)
		require.Equal(t, tt.known, k, "step %d", i)
		require.Equal(t, tt.reads, reads, "step %d", i)
	}
	require.True(t, c.firstWarning("emails"))
	require.False(t, c.firstWarning("emails"))
	c.forgetWarning("emails")
	require.True(t, c.firstWarning("emails"))
}
