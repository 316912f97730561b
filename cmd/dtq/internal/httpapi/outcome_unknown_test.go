package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

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
