package clustersuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestLimitsSchedulesAndHTTPWorkersOnEveryMaster runs the write paths of
// flow control, schedules and HTTP workers on queues of three masters:
// limits set, enforced and removed; a schedule triggered; a task claimed
// and completed over HTTP.
func TestLimitsSchedulesAndHTTPWorkersOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("feat")
	queues := queuesOnEveryMaster(t, c, prefix)
	a := startAPI(t, cc, prefix)
	startWorker(t, cc, prefix, queues, nil, map[string]dtq.HandlerFunc{
		"echo": func(ctx context.Context, task *dtq.Task) (any, error) { return "ok", nil },
	})
	keys := rdb.NewKeys(prefix)
	for i, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			// Limits: set, enforced with keyed tasks, read back, removed.
			status, raw := a.call(t, http.MethodPut, "/api/v1/queues/"+q+"/limits",
				`{"rate": {"limit": 50, "period": "1s", "burst": 5}, "concurrency": 2, "key_concurrency": 1}`)
			require.Equal(t, http.StatusOK, status, string(raw))
			var ids []string
			for j := range 8 {
				status, id := a.submit(t, fmt.Sprintf(`{"task_type":"echo","queue":%q,"concurrency_key":"k%d"}`, q, j%2))
				require.Equal(t, http.StatusAccepted, status)
				ids = append(ids, id)
			}
			for _, id := range ids {
				a.waitStatus(t, id, dtqtype.StatusSucceeded)
			}
			require.Eventually(t, func() bool { return cc.HLen(t.Context(), keys.KeyRunning(q)).Val() == 0 },
				10*time.Second, 10*time.Millisecond, "every key slot given back")
			// Retention on this master: compact records, counts, tidy.
			ti := a.waitStatus(t, ids[0], dtqtype.StatusSucceeded)
			require.True(t, ti.PayloadDropped)
			qi, err := a.insp.GetQueue(t.Context(), q)
			require.NoError(t, err)
			require.GreaterOrEqual(t, qi.Retained["succeeded"], int64(len(ids)))
			_, err = rdb.New(cc, prefix).Tidy(t.Context(), q, time.Now(), time.Now())
			require.NoError(t, err)
			status, raw = a.call(t, http.MethodGet, "/api/v1/queues/"+q+"/limits", "")
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, string(raw), `"key_concurrency":1`)
			status, _ = a.call(t, http.MethodDelete, "/api/v1/queues/"+q+"/limits", "")
			require.Equal(t, http.StatusOK, status)

			// A schedule on this queue, triggered now.
			name := fmt.Sprintf("nightly-%d", i)
			status, raw = a.call(t, http.MethodPut, "/api/v1/schedules/"+name,
				fmt.Sprintf(`{"spec":"0 3 * * *","queue":%q,"task_type":"echo"}`, q))
			require.Contains(t, []int{http.StatusOK, http.StatusCreated}, status, string(raw))
			status, raw = a.call(t, http.MethodPost, "/api/v1/schedules/"+name+"/trigger", "")
			require.Equal(t, http.StatusAccepted, status, string(raw))
			var trig struct {
				TaskID string `json:"task_id"`
				Task   struct {
					TaskID string `json:"task_id"`
				} `json:"task"`
			}
			require.NoError(t, json.Unmarshal(raw, &trig))
			tid := trig.TaskID
			if tid == "" {
				tid = trig.Task.TaskID
			}
			a.waitStatus(t, tid, dtqtype.StatusSucceeded)
		})
	}
	// Redis memory is the sum over the masters.
	mem, err := a.insp.RedisMemory(t.Context())
	require.NoError(t, err)
	require.NotNil(t, mem)
	var one int64
	for _, m := range c.Masters(t.Context()) {
		v, _ := strconv.ParseInt(infoValue(m.Client(t).Info(t.Context(), "memory").Val(), "used_memory"), 10, 64)
		require.Less(t, v, mem.UsedBytes, "one master holds less than the sum")
		one = v
	}
	require.Positive(t, one)

	// An HTTP worker on a queue no Go worker serves, placed by the cluster
	// wherever its tag lands.
	status, id := a.submit(t, `{"task_type":"resize","queue":"http-jobs"}`)
	require.Equal(t, http.StatusAccepted, status)
	status, raw := a.call(t, http.MethodPost, "/api/v1/claims",
		`{"worker_id":"py-1","queues":["http-jobs"],"max":1,"wait":"5s","lease":"30s"}`)
	require.Equal(t, http.StatusOK, status, string(raw))
	var claimed struct {
		Tasks []struct {
			TaskID     string `json:"task_id"`
			LeaseToken string `json:"lease_token"`
		} `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal(raw, &claimed))
	require.Len(t, claimed.Tasks, 1)
	require.Equal(t, id, claimed.Tasks[0].TaskID)
	status, raw = a.call(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete",
		fmt.Sprintf(`{"lease_token":%q,"result":{"ok":true}}`, claimed.Tasks[0].LeaseToken))
	require.Equal(t, http.StatusOK, status, string(raw))
	a.waitStatus(t, id, dtqtype.StatusSucceeded)
}

// infoValue reads one field of an INFO reply.
func infoValue(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}
