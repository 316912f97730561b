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
	require.ElementsMatch(t, []string{`no live worker serves queue "emails"`, `no live worker serves queue "sms"`}, res.header.Values(WarningHeader))

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
