package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestSubmissionWhoseEveryReplyIsLost: the API's Redis runs every ingest
// call it is sent (single, batch, the resends and the settling call) but
// each reply is lost. The task was created by the first run, so "nothing
// written" would be false: the answer is 503 OUTCOME_UNKNOWN naming the
// task, and retrying with the same key then finds that very task.
func TestSubmissionWhoseEveryReplyIsLost(t *testing.T) {
	t.Parallel()
	shared := redistest.New(t)
	proxy, err := faultproxy.Start(shared.Server.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MinRetryBackoff: 10 * time.Millisecond,
		MaxRetryBackoff: 50 * time.Millisecond})
	t.Cleanup(func() { _ = viaProxy.Close() })
	b := setup(t, options{redis: &redistest.Setup{Server: shared.Server, Client: viaProxy, Prefix: shared.Prefix}})
	// Loads the scripts while replies still arrive.
	require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"lost"}`).status)

	proxy.CutAfter([]byte(rdb.ScriptHash("ingest")), 1<<30)
	e := b.post(t, `{"task_type":"echo","queue":"lost"}`, "Idempotency-Key", "lost-1").
		requireError(t, http.StatusServiceUnavailable, codeOutcomeUnknown, "")
	require.Contains(t, e.Message, "same")
	id, _ := e.Details["task_id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "lost-1", e.Details["idempotency_key"])

	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo","queue":"lost"}]}`)
	require.Equal(t, http.StatusOK, res.status)
	var out batchJSON
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Len(t, out.Items, 1)
	require.Equal(t, http.StatusServiceUnavailable, out.Items[0].HTTPStatus)
	require.Equal(t, codeOutcomeUnknown, out.Items[0].Error.Code)
	proxy.CutAfter(nil, 0)

	// The truth behind the first answer: the task exists, once.
	n, err := shared.Client.Exists(b.ctx, b.keys.Task("lost", id)).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	// Retrying with the same key finds it: in flight, not a second task.
	again := b.post(t, `{"task_type":"echo","queue":"lost"}`, "Idempotency-Key", "lost-1").
		requireError(t, http.StatusConflict, "IDEMPOTENCY_IN_PROGRESS", "")
	require.Equal(t, id, again.Details["task_id"])
	sizes, err := b.insp.QueueSizes(b.ctx, []string{"lost"})
	require.NoError(t, err)
	require.Len(t, sizes, 1)
	require.EqualValues(t, 3, sizes[0].Depth, "the first task, the keyed one and the batch's one, each once")
}

// TestWorkflowSubmitWhoseRepliesAreLost: the replies of a workflow
// submission's scripts are lost on the way back from Redis. An answer never
// refuses the submission over its own workflow (409 naming it): one lost
// reply is resent and answers 202; every reply of the record's write lost
// is 503 OUTCOME_UNKNOWN naming the workflow; the activation's reply lost
// answers 202 submitting. A retry with the same key always names that one
// workflow, and once it ended replays it (200).
func TestWorkflowSubmitWhoseRepliesAreLost(t *testing.T) {
	t.Parallel()
	shared := redistest.New(t)
	proxy, err := faultproxy.Start(shared.Server.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MinRetryBackoff: 10 * time.Millisecond,
		MaxRetryBackoff: 50 * time.Millisecond})
	t.Cleanup(func() { _ = viaProxy.Close() })
	b := setup(t, options{redis: &redistest.Setup{Server: shared.Server, Client: viaProxy, Prefix: shared.Prefix}})
	body := func(ref string) string { return `{"nodes":[{"ref":"` + ref + `","queue":"lost","task_type":"echo"}]}` }
	// Loads the scripts (and registers the queue) while replies still arrive.
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/workflows", body("warm")).status)
	b.runWorkflowMaintenance(t)
	warm := b.claimOne(t, "lost")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/tasks/"+warm.TaskID+"/complete", `{"lease_token":"`+warm.LeaseToken+`"}`).status)

	var ids []string
	for _, tc := range []struct {
		name, script string
		cuts         int
		status       int // the first answer
	}{
		{"one record reply lost", "wf_create", 1, http.StatusAccepted},
		{"every record reply lost", "wf_create", 1 << 30, http.StatusServiceUnavailable},
		{"every activation reply lost", "wf_start", 1 << 30, http.StatusAccepted},
	} {
		key := "lost-" + tc.script + "-" + strconv.Itoa(tc.cuts)
		proxy.CutAfter([]byte(rdb.ScriptHash(tc.script)), tc.cuts)
		res := b.do(t, http.MethodPost, "/api/v1/workflows", body("a"), "Idempotency-Key", key)
		proxy.CutAfter(nil, 0)
		require.Equal(t, tc.status, res.status, "%s: %s", tc.name, res.body)
		var id string
		if tc.status == http.StatusServiceUnavailable {
			e := res.requireError(t, tc.status, codeOutcomeUnknown, "")
			id, _ = e.Details["workflow_id"].(string)
			require.Equal(t, key, e.Details["idempotency_key"])
			require.Contains(t, e.Message, "same idempotency key")
		} else {
			var sub wfSubmitJSON
			res.decode(t, &sub)
			id = sub.WorkflowID
			if tc.script == "wf_start" {
				require.Equal(t, "submitting", sub.Status, tc.name)
			}
		}
		require.NotEmpty(t, id, tc.name)
		ids = append(ids, id)

		// A retry with the key names that workflow: in progress while it
		// runs, replayed once it ended.
		e := b.do(t, http.MethodPost, "/api/v1/workflows", body("a"), "Idempotency-Key", key).
			requireError(t, http.StatusConflict, codeIdemInProgress, "")
		require.Equal(t, id, e.Details["workflow_id"], tc.name)
		l := b.claimOne(t, "lost") // the sweep completes a cut-short submission
		require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/complete", `{"lease_token":"`+l.LeaseToken+`"}`).status)
		require.Equal(t, id, l.WorkflowID, "%s: the node claimed is the workflow's", tc.name)
		require.Eventually(t, func() bool { return b.getWorkflow(t, id).Status == "succeeded" }, 30*time.Second, 10*time.Millisecond, tc.name)
		res = b.do(t, http.MethodPost, "/api/v1/workflows", body("a"), "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, res.status, "%s: %s", tc.name, res.body)
		var again wfSubmitJSON
		res.decode(t, &again)
		require.Equal(t, id, again.WorkflowID, tc.name)
		require.True(t, again.Duplicate)
	}
	// Each submission made one workflow (and the warm-up one).
	list, err := b.insp.ListWorkflows(b.ctx, &dtq.WorkflowListParams{})
	require.NoError(t, err)
	require.Len(t, list.Items, 4)
	for _, id := range ids {
		require.True(t, slices.ContainsFunc(list.Items, func(w *dtqtype.WorkflowSummary) bool { return w.ID == id }))
	}
}
