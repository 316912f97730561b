package httpapi

import (
	"encoding/json"
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
	require.JSONEq(t, `{"queue":"billing","created":true,"partitions":1}`, string(res.body))
	res = b.do(t, http.MethodPut, "/api/v1/queues/billing", "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"queue":"billing","created":false,"partitions":1}`, string(res.body))
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

// TestCreatePartitionedQueue: PUT with partitions creates them once; other
// partitions for an existing queue are 409; bad counts are 400; a queue's
// answer lists its partitions.
func TestCreatePartitionedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})

	res := b.do(t, http.MethodPut, "/api/v1/queues/hot", `{"partitions": 4}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.JSONEq(t, `{"queue":"hot","created":true,"partitions":4}`, string(res.body))
	res = b.do(t, http.MethodPut, "/api/v1/queues/hot", "")
	require.Equal(t, http.StatusOK, res.status, "a PUT without partitions never changes them")
	require.JSONEq(t, `{"queue":"hot","created":false,"partitions":4}`, string(res.body))
	e := b.do(t, http.MethodPut, "/api/v1/queues/hot", `{"partitions": 2}`).requireError(t, http.StatusConflict, codePartitionsConflict, "")
	require.EqualValues(t, 4, e.Details["partitions"])
	require.Contains(t, e.Message, "partitions are chosen when a queue is created")
	b.do(t, http.MethodPut, "/api/v1/queues/billing", "")
	b.do(t, http.MethodPut, "/api/v1/queues/billing", `{"partitions": 2}`).requireError(t, http.StatusConflict, codePartitionsConflict, "")
	for _, body := range []string{`{"partitions": 0}`, `{"partitions": 257}`, `{"partitions": "8"}`, `{"parts": 8}`} {
		b.do(t, http.MethodPut, "/api/v1/queues/cold", body).requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
	}

	for range 20 {
		b.submit(t, dtq.Submission{Type: "echo", Queue: "hot"})
	}
	res = b.do(t, http.MethodGet, "/api/v1/queues/hot", "")
	require.Equal(t, http.StatusOK, res.status)
	var qi struct {
		Depth      int64 `json:"depth"`
		Partitions []struct {
			Partition int   `json:"partition"`
			Depth     int64 `json:"depth"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal(res.body, &qi))
	require.Equal(t, int64(20), qi.Depth)
	require.Len(t, qi.Partitions, 4)
	for k, p := range qi.Partitions {
		require.Equal(t, k, p.Partition)
		require.Equal(t, int64(5), p.Depth, "keyless tasks spread round-robin")
	}
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
