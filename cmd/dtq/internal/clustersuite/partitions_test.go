package clustersuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestPartitionedQueueOnEveryMaster: a queue created with 6 partitions on
// a 3-master Cluster has 2 partitions on each master; keyed and keyless
// tasks go to every partition (a key's to one), a Go worker and an HTTP
// worker serving the queue by name run every task once, key_concurrency 1
// never overlaps, and a repeat of an idempotency key finds its task.
func TestPartitionedQueueOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("part")
	a := startAPI(t, cc, prefix)
	const queue = "hot"
	status, raw := a.call(t, http.MethodPut, "/api/v1/queues/"+queue, `{"partitions": 6}`)
	require.Equal(t, http.StatusCreated, status, string(raw))
	status, raw = a.call(t, http.MethodPut, "/api/v1/queues/"+queue+"/limits", `{"key_concurrency": 1}`)
	require.Equal(t, http.StatusOK, status, string(raw))

	r := rdb.New(cc, prefix)
	parts, err := r.Partitions(t.Context(), queue, false)
	require.NoError(t, err)
	require.Len(t, parts, 6)
	perMaster := map[string]int{}
	for _, p := range parts {
		m, err := c.MasterOf(t.Context(), r.Keys().Depth(p))
		require.NoError(t, err)
		perMaster[m.Addr]++
	}
	require.Len(t, perMaster, 3, "partitions on every master")
	for addr, n := range perMaster {
		require.Equal(t, 2, n, "master %s holds two partitions", addr)
	}

	var mu sync.Mutex
	running := map[string]int{}
	var overlaps, runs atomic.Int64
	handler := func(ctx context.Context, task *dtq.Task) (any, error) {
		var p struct{ Key string }
		_ = json.Unmarshal(task.Payload, &p)
		mu.Lock()
		running[p.Key]++
		if p.Key != "" && running[p.Key] > 1 {
			overlaps.Add(1)
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // long enough for an overlap to show
		mu.Lock()
		running[p.Key]--
		mu.Unlock()
		runs.Add(1)
		return nil, nil
	}
	ids := map[string]string{}
	for i := range 90 {
		key := ""
		if i%3 != 0 {
			key = fmt.Sprintf("k%d", i%11)
		}
		status, id := a.submit(t, jobBody(queue, key), "Idempotency-Key", fmt.Sprintf("idem-%d", i))
		require.Equal(t, http.StatusAccepted, status)
		ids[id] = key
	}
	// An HTTP worker claims from the same queue, by its name, before a Go
	// worker serves it.
	var claimed int
	httpParts := map[string]bool{}
	for range 3 {
		status, raw := a.call(t, http.MethodPost, "/api/v1/claims",
			fmt.Sprintf(`{"worker_id":"http-1","queues":[%q],"max":5}`, queue))
		require.Equal(t, http.StatusOK, status, string(raw))
		var out struct {
			Tasks []struct {
				ID         string `json:"task_id"`
				Queue      string `json:"queue"`
				LeaseToken string `json:"lease_token"`
			} `json:"tasks"`
		}
		require.NoError(t, json.Unmarshal(raw, &out))
		for _, tk := range out.Tasks {
			require.Equal(t, queue, tk.Queue)
			part, err := r.TaskQueue(t.Context(), tk.ID)
			require.NoError(t, err)
			httpParts[part] = true
			status, raw := a.call(t, http.MethodPost, "/api/v1/tasks/"+tk.ID+"/complete",
				fmt.Sprintf(`{"lease_token":%q,"result":"http"}`, tk.LeaseToken))
			require.Equal(t, http.StatusOK, status, string(raw))
			claimed++
		}
	}
	require.Equal(t, 15, claimed)
	require.Greater(t, len(httpParts), 1, "an HTTP worker's claims reach several partitions")
	startWorker(t, cc, prefix, []string{queue}, nil, map[string]dtq.HandlerFunc{"job": handler})

	used := map[string]bool{}
	partOf := map[string]string{}
	for id, key := range ids {
		ti := a.waitStatus(t, id, dtqtype.StatusSucceeded)
		require.Equal(t, queue, ti.Queue)
		part, err := r.TaskQueue(t.Context(), id)
		require.NoError(t, err)
		used[part] = true
		if key != "" {
			if had, ok := partOf[key]; ok {
				require.Equal(t, had, part, "key %s in one partition", key)
			}
			partOf[key] = part
		}
	}
	require.Len(t, used, 6, "tasks in every partition")
	require.Equal(t, int64(len(ids)-claimed), runs.Load(), "every task ran once: on the Go worker or the HTTP worker")
	require.Zero(t, overlaps.Load(), "key_concurrency 1 never overlaps")

	// A repeat of an idempotency key is answered from its task's partition.
	for i := range 9 {
		key := ""
		if i%3 != 0 {
			key = fmt.Sprintf("k%d", i%11)
		}
		status, id := a.submit(t, jobBody(queue, key), "Idempotency-Key", fmt.Sprintf("idem-%d", i))
		require.Equal(t, http.StatusOK, status, "replay of idem-%d", i)
		require.Contains(t, ids, id)
	}

	qi, err := a.insp.GetQueue(t.Context(), queue)
	require.NoError(t, err)
	require.Len(t, qi.Partitions, 6)
	require.Zero(t, qi.Depth)
}

// jobBody is a job submission to queue, keyed by key unless it is "".
func jobBody(queue, key string) string {
	if key == "" {
		return fmt.Sprintf(`{"task_type":"job","queue":%q,"payload":{"key":""}}`, queue)
	}
	return fmt.Sprintf(`{"task_type":"job","queue":%q,"concurrency_key":%q,"payload":{"key":%q}}`, queue, key, key)
}
