package clustersuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestProgressAndLogsOnEveryMaster: on three queues served by three
// masters, a Go handler's progress and log lines land in the task's slot
// before its success, read through the API; an HTTP worker's report is
// fenced; the logs take the task's retention when it ends.
func TestProgressAndLogsOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("progress")
	ctx := context.Background()
	queues := queuesOnEveryMaster(t, c, prefix)
	a := startAPI(t, cc, prefix)
	client, err := openDeployment(t, cc, prefix).NewClient(nil)
	require.NoError(t, err)
	keys := rdb.NewKeys(prefix)
	startWorkerOf(t, openDeployment(t, cc, prefix, func(c *dtq.DeploymentConfig) { c.SucceededRetention = time.Hour }), queues, nil, map[string]dtq.HandlerFunc{
		"report": func(ctx context.Context, task *dtq.Task) (any, error) {
			dtq.Logger(ctx).Info("on", "queue", task.Queue)
			return nil, dtq.Progress(ctx, map[string]string{"queue": task.Queue})
		},
	})

	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			res, err := client.Submit(ctx, dtq.Submission{Type: "report", Queue: q})
			require.NoError(t, err)
			ti := a.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
			require.JSONEq(t, `{"queue":"`+q+`"}`, string(ti.Progress))
			status, body := a.call(t, http.MethodGet, "/api/v1/tasks/"+res.TaskID+"/logs", "")
			require.Equal(t, http.StatusOK, status, string(body))
			var page struct {
				Items []dtqtype.LogLine `json:"items"`
			}
			require.NoError(t, json.Unmarshal(body, &page))
			require.Len(t, page.Items, 1)
			require.Equal(t, "level=INFO msg=on queue="+q, page.Items[0].Line)
			logTTL := cc.PTTL(ctx, keys.TaskLog(q, res.TaskID, 1)).Val()
			require.Positive(t, logTTL, "the log takes the task's retention")
			require.InDelta(t, cc.PTTL(ctx, keys.Task(q, res.TaskID)).Val().Milliseconds(), logTTL.Milliseconds(), 1000)

			// An HTTP worker, on a queue of the same master that the Go
			// worker does not serve: a report lands; after complete it is 409.
			hq := sameMaster(t, c, keys, q)
			_, err = client.Submit(ctx, dtq.Submission{Type: "remote", Queue: hq})
			require.NoError(t, err)
			status, body = a.call(t, http.MethodPost, "/api/v1/claims", `{"worker_id": "py-`+q+`", "queues": ["`+hq+`"], "wait": "5s"}`)
			require.Equal(t, http.StatusOK, status, string(body))
			var claimed struct {
				Tasks []struct {
					TaskID     string `json:"task_id"`
					LeaseToken string `json:"lease_token"`
				} `json:"tasks"`
			}
			require.NoError(t, json.Unmarshal(body, &claimed))
			require.Len(t, claimed.Tasks, 1)
			lt := claimed.Tasks[0]
			report := `{"lease_token": "` + lt.LeaseToken + `", "progress": 50, "logs": ["half"], "seq": 1}`
			status, body = a.call(t, http.MethodPost, "/api/v1/tasks/"+lt.TaskID+"/progress", report)
			require.Equal(t, http.StatusOK, status, string(body))
			status, body = a.call(t, http.MethodPost, "/api/v1/tasks/"+lt.TaskID+"/complete", `{"lease_token": "`+lt.LeaseToken+`"}`)
			require.Equal(t, http.StatusOK, status, string(body))
			status, body = a.call(t, http.MethodPost, "/api/v1/tasks/"+lt.TaskID+"/progress",
				`{"lease_token": "`+lt.LeaseToken+`", "logs": ["late"], "seq": 2}`)
			require.Equal(t, http.StatusConflict, status, string(body))
			page.Items = nil
			status, body = a.call(t, http.MethodGet, "/api/v1/tasks/"+lt.TaskID+"/logs", "")
			require.Equal(t, http.StatusOK, status, string(body))
			require.NoError(t, json.Unmarshal(body, &page))
			require.Len(t, page.Items, 1)
			require.Equal(t, "half", page.Items[0].Line)
		})
	}
}

// sameMaster is a queue name other than q whose keys the master of q's
// serves.
func sameMaster(t *testing.T, c *redistest.Cluster, keys rdb.Keys, q string) string {
	t.Helper()
	ctx := context.Background()
	want, err := c.MasterOf(ctx, keys.Depth(q))
	require.NoError(t, err)
	for i := range 1000 {
		name := fmt.Sprintf("http%d", i)
		m, err := c.MasterOf(ctx, keys.Depth(name))
		require.NoError(t, err)
		if m.Addr == want.Addr {
			return name
		}
	}
	t.Fatalf("no queue on the master of %s", q)
	return ""
}
