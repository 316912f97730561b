package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestWorkflowNodeReads: a workflow submitted through the library shows
// over HTTP as it is stored — a node whose dep has not ended is a waiting
// task carrying its workflow id and ref, found by the waiting filter and
// counted in its queue — and every one of those answers passes the
// OpenAPI document (the test server validates each answer).
func TestWorkflowNodeReads(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Name: "reads", Nodes: []dtq.Node{
		{Ref: "fetch", Submission: dtq.Submission{Queue: "q", Type: "echo"}},
		{Ref: "notify", Deps: []string{"fetch"}, Submission: dtq.Submission{Queue: "q", Type: "echo"}},
	}})
	require.NoError(t, err)
	require.Len(t, res.Nodes, 2)
	ids := map[string]string{}
	for _, n := range res.Nodes {
		ids[n.Ref] = n.TaskID
	}

	var node struct {
		TaskID     string `json:"task_id"`
		Status     string `json:"status"`
		WorkflowID string `json:"workflow_id"`
		Ref        string `json:"ref"`
	}
	got := b.do(t, http.MethodGet, "/api/v1/tasks/"+ids["notify"], "")
	require.Equal(t, http.StatusOK, got.status)
	got.decode(t, &node)
	require.Equal(t, "waiting", node.Status)
	require.Equal(t, res.WorkflowID, node.WorkflowID)
	require.Equal(t, "notify", node.Ref)

	var page struct {
		Items []struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
		} `json:"items"`
	}
	got = b.do(t, http.MethodGet, "/api/v1/tasks?queue=q&status=waiting", "")
	require.Equal(t, http.StatusOK, got.status)
	got.decode(t, &page)
	require.Len(t, page.Items, 1)
	require.Equal(t, ids["notify"], page.Items[0].TaskID)

	var queue struct {
		Waiting int64 `json:"waiting"`
	}
	got = b.do(t, http.MethodGet, "/api/v1/queues/q", "")
	require.Equal(t, http.StatusOK, got.status)
	got.decode(t, &queue)
	require.Equal(t, int64(1), queue.Waiting)
}
