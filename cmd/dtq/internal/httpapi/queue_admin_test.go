package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestCreateAndDeleteQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})

	res := b.do(t, http.MethodPut, "/api/v1/queues/billing", "")
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.JSONEq(t, `{"queue":"billing","created":true}`, string(res.body))
	res = b.do(t, http.MethodPut, "/api/v1/queues/billing", "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"queue":"billing","created":false}`, string(res.body))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/queues/billing", "").status)
	b.do(t, http.MethodPut, "/api/v1/queues/Bad!", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")

	// A queue with a task is kept; 409 says what it holds.
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "billing"})
	e := b.do(t, http.MethodDelete, "/api/v1/queues/billing", "").requireError(t, http.StatusConflict, codeQueueNotEmpty, "")
	require.Equal(t, "live", e.Details["holds"])
	require.EqualValues(t, 1, e.Details["count"])

	_, err := b.admin.CancelTask(b.ctx, id, "")
	require.NoError(t, err)
	res = b.do(t, http.MethodDelete, "/api/v1/queues/billing", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	b.do(t, http.MethodGet, "/api/v1/queues/billing", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	b.do(t, http.MethodDelete, "/api/v1/queues/billing", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	// The cancelled task went with its queue.
	b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")

	var actions []string
	for _, a := range b.audit(t) {
		if a.Target == "billing" {
			actions = append(actions, a.Action)
		}
	}
	require.Equal(t, []string{"queue.delete", "queue.create", "queue.create"}, actions)
}

func TestDeclaredQueuePolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.DeclaredQueuesOnly = true }})

	e := b.post(t, `{"task_type":"echo","queue":"made-up"}`).requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	require.Contains(t, e.Message, "PUT /api/v1/queues/made-up")
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo","queue":"made-up"}]}`)
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, string(res.body), `"QUEUE_NOT_FOUND"`)
	require.Equal(t, 0, b.keyCount(t), "nothing is written for an undeclared queue")

	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPut, "/api/v1/queues/made-up", "").status)
	require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"made-up"}`).status)
}
