package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// cancelJSON is the answer of POST /tasks/{id}/cancel.
type cancelJSON struct {
	Task            taskJSON `json:"task"`
	CancelRequested bool     `json:"cancel_requested"`
}

// taskBodyJSON is the answer of run-now and the DLQ actions.
type taskBodyJSON struct {
	Task struct {
		taskJSON
		Attempt          int             `json:"attempt"`
		PreviousAttempts int             `json:"previous_attempts"`
		Metadata         json.RawMessage `json:"metadata"`
	} `json:"task"`
}

func TestCancelQueuedTaskThenResubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	sub := `{"task_type":"echo","queue":"idle"}`
	created := b.post(t, sub, "Idempotency-Key", "order-7")
	require.Equal(t, http.StatusAccepted, created.status)
	id := created.task(t).TaskID

	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", `{"reason":"customer changed their mind"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var c cancelJSON
	res.decode(t, &c)
	require.False(t, c.CancelRequested)
	require.Equal(t, id, c.Task.TaskID)
	require.Equal(t, "cancelled", c.Task.Status)

	// Cancelling again is fine, with or without a body.
	for _, body := range []string{"", "{}"} {
		res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", body)
		require.Equal(t, http.StatusAccepted, res.status, string(res.body))
		res.decode(t, &c)
		require.Equal(t, "cancelled", c.Task.Status)
	}

	// The key now replays the cancelled task.
	again := b.post(t, sub, "Idempotency-Key", "order-7")
	require.Equal(t, http.StatusOK, again.status, string(again.body))
	tk := again.task(t)
	require.Equal(t, id, tk.TaskID)
	require.Equal(t, "cancelled", tk.Status)
	require.True(t, *tk.Duplicate)

	require.Equal(t, []string{"TASK_QUEUED", "TASK_CANCELLED"}, b.events(t, "idle", id))
	b.do(t, http.MethodPost, "/api/v1/tasks/"+missingID+"/cancel", "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	b.do(t, http.MethodPost, "/api/v1/tasks/not-an-id/cancel", "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")
}

func TestCancelBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "idle"})
	path := "/api/v1/tasks/" + id + "/cancel"
	for _, tc := range []struct {
		body, field string
	}{
		{`{"reason":"` + strings.Repeat("x", maxReasonLen+1) + `"}`, "reason"},
		{`{"reason":"two\nlines"}`, "reason"},
		{`{"reason":5}`, "reason"},
		{`{"why":"no"}`, "why"},
		{`[]`, ""},
		{`null`, ""},
		{`{"reason":"a"} {"reason":"b"}`, ""},
		{`{"reason":`, ""},
	} {
		b.do(t, http.MethodPost, path, tc.body).requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
	b.do(t, http.MethodPost, path, `{"reason":"x"}`, "Content-Type", "text/plain").
		requireError(t, http.StatusUnsupportedMediaType, codeInvalidRequest, "Content-Type")
	b.do(t, http.MethodPost, path+"?force=1", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "force")
	b.do(t, http.MethodPost, path, `{"reason":"`+strings.Repeat("x", maxActionBody)+`"}`).
		requireError(t, http.StatusRequestEntityTooLarge, codePayloadTooLarge, "")

	// A reason of exactly the limit, in characters, is fine.
	res := b.do(t, http.MethodPost, path, `{"reason":"`+strings.Repeat("é", maxReasonLen)+`"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	// Nothing above changed the task before the valid request.
	require.Equal(t, []string{"TASK_QUEUED", "TASK_CANCELLED"}, b.events(t, "idle", id))
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.startWorker(t, map[string]int{"default": 1}, handlers{
		// Like the example sleep handler: it honours its context.
		"sleep": func(ctx context.Context, task *dtq.Task) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return "slept", nil
			}
		},
	})
	res := b.post(t, `{"task_type":"sleep","payload":{"seconds":60}}`, "Idempotency-Key", "nap")
	require.Equal(t, http.StatusAccepted, res.status)
	id := res.task(t).TaskID
	b.waitStatus(t, id, dtqtype.StatusRunning)

	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", `{"reason":"too slow"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var c cancelJSON
	res.decode(t, &c)
	require.True(t, c.CancelRequested)
	var raw struct {
		Task struct {
			CancelRequested bool `json:"cancel_requested"`
		} `json:"task"`
	}
	res.decode(t, &raw)
	require.True(t, raw.Task.CancelRequested)

	// The handler stops within seconds (not after its minute) and the task
	// ends cancelled, never succeeded.
	res = b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=10s", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "cancelled", res.task(t).Status)
	ev := b.events(t, "default", id)
	require.NotContains(t, ev, "TASK_SUCCEEDED")
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_CANCEL_REQUESTED", "TASK_CANCELLED"}, ev)

	// Cancelled is final, and cancelling it again is still 202.
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", "")
	require.Equal(t, http.StatusAccepted, res.status)
	res.decode(t, &c)
	require.False(t, c.CancelRequested)
	again := b.post(t, `{"task_type":"sleep","payload":{"seconds":60}}`, "Idempotency-Key", "nap")
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "cancelled", again.task(t).Status)
}

func TestCancelFinishedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.startWorker(t, map[string]int{"default": 1}, handlers{
		"echo": func(ctx context.Context, task *dtq.Task) (any, error) { return task.Payload, nil },
	})
	id := b.submit(t, dtq.Submission{Type: "echo"})
	b.waitStatus(t, id, dtqtype.StatusSucceeded)

	e := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", "").requireError(t, http.StatusConflict, codeTaskTerminal, "")
	require.Equal(t, map[string]any{"task_id": id, "status": "succeeded"}, e.Details)
	e = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/run-now", "").requireError(t, http.StatusConflict, codeTaskTerminal, "")
	require.Equal(t, "succeeded", e.Details["status"])
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","queue":"idle","delay_ms":3600000}`)
	require.Equal(t, http.StatusAccepted, res.status)
	id := res.task(t).TaskID
	require.Equal(t, "pending", res.task(t).Status)

	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/run-now", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var tb taskBodyJSON
	res.decode(t, &tb)
	require.Equal(t, "queued", tb.Task.Status)
	require.Equal(t, id, tb.Task.TaskID)

	// Queued already: nothing to make due.
	e := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/run-now", "").requireError(t, http.StatusConflict, codeTaskConflict, "")
	require.Equal(t, map[string]any{"task_id": id, "status": "queued"}, e.Details)
	require.Contains(t, e.Message, "pending or retrying")

	b.do(t, http.MethodPost, "/api/v1/tasks/"+missingID+"/run-now", "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/run-now", `{"now":true}`).requireError(t, http.StatusBadRequest, codeInvalidRequest, "now")
}

func TestDeleteTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	created := b.post(t, `{"task_type":"echo","queue":"idle"}`, "Idempotency-Key", "del-1")
	require.Equal(t, http.StatusAccepted, created.status)
	id := created.task(t).TaskID

	e := b.do(t, http.MethodDelete, "/api/v1/tasks/"+id, "").requireError(t, http.StatusConflict, codeTaskConflict, "")
	require.Equal(t, map[string]any{"task_id": id, "status": "queued"}, e.Details)
	require.Contains(t, e.Message, "cancel it first")

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", "").status)
	res := b.do(t, http.MethodDelete, "/api/v1/tasks/"+id, "")
	require.Equal(t, http.StatusNoContent, res.status, string(res.body))
	require.Empty(t, res.body)
	require.NotEmpty(t, res.header.Get("X-Request-ID"))

	b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	b.do(t, http.MethodDelete, "/api/v1/tasks/"+id, "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")

	// With the task gone, its key no longer replays: it makes new work.
	again := b.post(t, `{"task_type":"echo","queue":"idle"}`, "Idempotency-Key", "del-1")
	require.Equal(t, http.StatusAccepted, again.status, string(again.body))
	require.NotEqual(t, id, again.task(t).TaskID)
}
