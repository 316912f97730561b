package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

type dlqEntryJSON struct {
	taskJSON
	FailedAt  *string `json:"failed_at"`
	Execution struct {
		ErrorClass   string `json:"error_class"`
		ErrorMessage string `json:"error_message"`
	} `json:"execution"`
}

type dlqListJSON struct {
	Items      []dlqEntryJSON `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

type bulkJSON struct {
	Matched    int64   `json:"matched"`
	Processed  int64   `json:"processed"`
	NextCursor *string `json:"next_cursor"`
}

func TestDLQRequeueAndIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var broken atomic.Bool
	broken.Store(true)
	b.startWorker(t, map[string]int{"jobs": 1}, handlers{
		"job": func(ctx context.Context, task *dtq.Task) (any, error) {
			if broken.Load() {
				return nil, dtq.Permanent(errors.New("downstream rejected the order"))
			}
			return map[string]bool{"ok": true}, nil
		},
	})
	sub := `{"task_type":"job","queue":"jobs","payload":{"order":9}}`
	res := b.post(t, sub, "Idempotency-Key", "order-9")
	require.Equal(t, http.StatusAccepted, res.status)
	id := res.task(t).TaskID
	b.waitStatus(t, id, dtqtype.StatusDeadLettered)

	var l dlqListJSON
	b.do(t, http.MethodGet, "/api/v1/dlq", "").decode(t, &l)
	require.Len(t, l.Items, 1)
	require.Nil(t, l.NextCursor)
	require.Equal(t, id, l.Items[0].TaskID)
	require.JSONEq(t, `{"order":9}`, string(l.Items[0].Payload))
	require.Equal(t, "downstream rejected the order", l.Items[0].Execution.ErrorMessage)
	require.NotNil(t, l.Items[0].FailedAt)

	var e dlqEntryJSON
	res = b.do(t, http.MethodGet, "/api/v1/dlq/"+id, "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &e)
	require.Equal(t, "dead_lettered", e.Status)
	require.NotNil(t, e.FailedAt)

	// Pause the queue so that the requeued task waits: while it is live,
	// its key answers 409.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/jobs/pause", "").status)
	broken.Store(false)
	res = b.do(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var tb taskBodyJSON
	res.decode(t, &tb)
	require.Equal(t, "queued", tb.Task.Status)
	require.Equal(t, 1, tb.Task.Attempt)
	require.Equal(t, 1, tb.Task.PreviousAttempts)

	conflict := b.post(t, sub, "Idempotency-Key", "order-9").requireError(t, http.StatusConflict, codeIdemInProgress, "")
	require.Equal(t, id, conflict.Details["task_id"])
	b.do(t, http.MethodGet, "/api/v1/dlq/"+id, "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")
	b.do(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")

	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/jobs/resume", "").status)
	b.waitStatus(t, id, dtqtype.StatusSucceeded)
	replay := b.post(t, sub, "Idempotency-Key", "order-9")
	require.Equal(t, http.StatusOK, replay.status, string(replay.body))
	tk := replay.task(t)
	require.True(t, *tk.Duplicate)
	require.Equal(t, id, tk.TaskID)
	require.Equal(t, "succeeded", tk.Status)

	for _, missing := range []string{missingID, "not-an-id"} {
		b.do(t, http.MethodGet, "/api/v1/dlq/"+missing, "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")
		b.do(t, http.MethodPost, "/api/v1/dlq/"+missing+"/requeue", "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")
		b.do(t, http.MethodPost, "/api/v1/dlq/"+missing+"/discard", "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")
	}
}

// classedError is a handler error with its own error_class.
type classedError string

func (e classedError) Error() string      { return "failed: " + string(e) }
func (e classedError) ErrorClass() string { return string(e) }

// deadLetterMany dead-letters n tasks: types a and b alternate, queues q1
// and q2 alternate in pairs. Type a fails with error class Rejected, b with
// Upstream. It returns the ids by type and queue.
func deadLetterMany(t *testing.T, b *bundle, n int) map[string][]string {
	t.Helper()
	fail := func(ctx context.Context, task *dtq.Task) (any, error) {
		return nil, dtq.Permanent(classedError(map[string]string{"a": "Rejected", "b": "Upstream"}[task.Type]))
	}
	b.startWorker(t, map[string]int{"q1": 1, "q2": 1}, handlers{"a": fail, "b": fail})
	out := map[string][]string{}
	var all []string
	for i := range n {
		typ, q := []string{"a", "b"}[i%2], []string{"q1", "q2"}[i/2%2]
		id := b.submit(t, dtq.Submission{Type: typ, Queue: q})
		out[typ+"/"+q] = append(out[typ+"/"+q], id)
		all = append(all, id)
	}
	for _, id := range all {
		b.waitStatus(t, id, dtqtype.StatusDeadLettered)
	}
	return out
}

func TestDLQListFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ids := deadLetterMany(t, b, 12)

	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		q := url.Values{"limit": {"5"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l dlqListJSON
		b.do(t, http.MethodGet, "/api/v1/dlq?"+q.Encode(), "").decode(t, &l)
		for _, e := range l.Items {
			require.False(t, seen[e.TaskID], "entry %s twice", e.TaskID)
			seen[e.TaskID] = true
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	require.Len(t, seen, 12)

	collect := func(query string) []string {
		var got []string
		cursor := ""
		for {
			q, err := url.ParseQuery(query)
			require.NoError(t, err)
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var l dlqListJSON
			b.do(t, http.MethodGet, "/api/v1/dlq?"+q.Encode(), "").decode(t, &l)
			for _, e := range l.Items {
				got = append(got, e.TaskID)
			}
			if l.NextCursor == nil {
				return got
			}
			cursor = *l.NextCursor
		}
	}
	require.ElementsMatch(t, append(append([]string{}, ids["a/q1"]...), ids["a/q2"]...), collect("type=a"))
	require.ElementsMatch(t, ids["b/q2"], collect("type=b&queue=q2"))
	require.ElementsMatch(t, ids["a/q1"], collect("queue=q1&error_class=Rejected&limit=2"))
	require.ElementsMatch(t, ids["b/q1"], collect("queue=q1&error_class=Upstream&type=b"))
	require.Empty(t, collect("error_class=Upstream&type=a"))
}

func TestDLQListBadQuery(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, tc := range []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=x", "limit"},
		{"queue=Bad_Queue", "queue"},
		{"cursor=%21%21", "cursor"},
		{"cursor=e30", "cursor"}, // {}: the offsets-per-queue form cursors had before, refused
		{"status=dead_lettered", "status"},
		{"type=a&type=b", "type"},
	} {
		res := b.do(t, http.MethodGet, "/api/v1/dlq?"+tc.query, "")
		if tc.field == "" {
			require.Equal(t, http.StatusOK, res.status, tc.query)
			continue
		}
		res.requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
}

func TestDLQDiscardAndBulk(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ids := deadLetterMany(t, b, 16)

	gone := ids["a/q1"][0]
	res := b.do(t, http.MethodPost, "/api/v1/dlq/"+gone+"/discard", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var tb taskBodyJSON
	res.decode(t, &tb)
	require.Equal(t, "dead_lettered", tb.Task.Status)
	require.JSONEq(t, `{"discarded":true}`, string(tb.Task.Metadata))
	b.do(t, http.MethodPost, "/api/v1/dlq/"+gone+"/discard", "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")
	b.do(t, http.MethodGet, "/api/v1/dlq/"+gone, "").requireError(t, http.StatusNotFound, codeDLQNotFound, "")

	bulk := func(path, body string) bulkJSON {
		t.Helper()
		res := b.do(t, http.MethodPost, path, body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var out bulkJSON
		res.decode(t, &out)
		require.Nil(t, out.NextCursor)
		return out
	}
	// Filters in the body: the a tasks of q1, less the discarded one.
	require.Equal(t, bulkJSON{Matched: 3, Processed: 3}, bulk("/api/v1/dlq/purge", `{"queue":"q1","type":"a"}`))
	require.Equal(t, bulkJSON{}, bulk("/api/v1/dlq/purge", `{"queue":"q1","type":"a"}`))
	// Filters in the query string: every b task, in both queues.
	require.Equal(t, bulkJSON{Matched: 8, Processed: 8}, bulk("/api/v1/dlq/requeue?type=b", ""))
	for _, id := range append(ids["b/q1"], ids["b/q2"]...) {
		tk, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, 1, tk.PreviousAttempts, "requeued once")
	}
	// No match: nothing to do.
	require.Equal(t, bulkJSON{}, bulk("/api/v1/dlq/requeue", `{"error_class":"Timeout"}`))
	// The a tasks of q2 by their error class, with the filter in the query.
	require.Equal(t, bulkJSON{Matched: 4, Processed: 4}, bulk("/api/v1/dlq/purge?queue=q2&error_class=Rejected", ""))

	for _, tc := range []struct{ path, body, field string }{
		{"/api/v1/dlq/requeue?type=b", `{"type":"b"}`, ""},
		{"/api/v1/dlq/requeue", `{"queue":"Bad_Queue"}`, "queue"},
		{"/api/v1/dlq/purge?queue=Bad_Queue", "", "queue"},
		{"/api/v1/dlq/purge?cursor=not-a-cursor", "", "cursor"},
		{"/api/v1/dlq/purge", `{"cursor":"eyJxIjo5OX0"}`, "cursor"},
		{"/api/v1/dlq/purge", `{"status":"x"}`, "status"},
		{"/api/v1/dlq/purge?limit=5", "", "limit"},
		{"/api/v1/dlq/purge", `{"queue":1}`, "queue"},
	} {
		b.do(t, http.MethodPost, tc.path, tc.body).requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
}

// TestDLQRequeueDeadline: a requeue clears the task's deadline, or sets the
// one its body gives; a bad body is refused with the field named and the
// entry left in place.
func TestDLQRequeueDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.startWorker(t, map[string]int{"dl": 1}, handlers{
		"job": func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) },
	})
	deadLetter := func() string {
		res := b.post(t, `{"task_type":"job","queue":"dl","ttl_seconds":600}`)
		require.Equal(t, http.StatusAccepted, res.status)
		id := res.task(t).TaskID
		b.waitStatus(t, id, dtqtype.StatusDeadLettered)
		return id
	}
	id := deadLetter()
	for _, c := range []struct{ body, field string }{
		{`{"ttl_seconds":0}`, "ttl_seconds"},
		{`{"ttl_seconds":"x"}`, "ttl_seconds"},
		{`{"expires_at":"tomorrow"}`, "expires_at"},
		{`{"expires_at":"2001-01-01T00:00:00Z"}`, "expires_at"},
		{`{"ttl_seconds":5,"expires_at":"2101-01-01T00:00:00Z"}`, "expires_at"},
		{`{"deadline":5}`, "deadline"},
	} {
		res := b.do(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", c.body)
		require.Equal(t, http.StatusBadRequest, res.status, c.body)
		require.Contains(t, string(res.body), `"field":"`+c.field+`"`, c.body)
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/dlq/"+id, "").status, "still in the DLQ")

	// With a new deadline, and with none (the original one is cleared).
	pause := func() {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/dl/pause", "").status)
	}
	pause()
	res := b.do(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", `{"ttl_seconds":3600}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	ti, err := b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), ti.ExpiresAt.Time, time.Minute)

	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/dl/resume", "").status)
	b.waitStatus(t, id, dtqtype.StatusDeadLettered)
	pause()
	res = b.do(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	ti, err = b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	require.True(t, ti.ExpiresAt.IsZero(), "the deadline is cleared")
}
