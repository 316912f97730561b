package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

func TestWorkersAndAudit(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-golden-worker", "default")
	ok := b.submit(t, dtq.Submission{Type: "echo"})
	bad := b.submit(t, dtq.Submission{Type: "always_fail", MaxAttempts: 1})
	b.waitStatus(t, ok, dtqtype.StatusSucceeded)
	b.waitStatus(t, bad, dtqtype.StatusDeadLettered)
	// The counters reach the heartbeat record with the next heartbeat.
	require.Eventually(t, func() bool {
		w, err := b.insp.GetWorker(b.ctx, "cli-golden-worker")
		require.NoError(t, err)
		return w.Processed == 2 && w.Failed == 1 && len(w.InFlight) == 0 && w.Status == "ready"
	}, 20*time.Second, 10*time.Millisecond)
	golden(t, "workers_list", b.ok(t, "workers", "list"))

	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workers", "list", "-o", "json")), &items))
	require.Len(t, items, 1)
	require.Equal(t, "cli-golden-worker", items[0]["worker_id"])
	require.Equal(t, true, items[0]["live"])

	out := b.ok(t, "workers", "get", "cli-golden-worker")
	require.Contains(t, out, "worker_id:              cli-golden-worker\n")
	require.Contains(t, out, "live:                   live\n")
	var w map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workers", "get", "cli-golden-worker", "-o", "json")), &w))
	require.Equal(t, 2.0, w["processed"])
	code, stdout, stderr := b.run(t, "workers", "get", "nobody")
	requireAPIError(t, code, stdout, stderr, "WORKER_NOT_FOUND")

	// Admin actions land in the audit log under the key's name.
	pending := b.submit(t, dtq.Submission{Queue: "later", Type: "echo", Delay: time.Hour})
	b.ok(t, "tasks", "cancel", pending, "--reason", "not needed")
	b.ok(t, "queues", "pause", "later")
	b.ok(t, "dlq", "requeue", bad)
	golden(t, "audit", b.ok(t, "audit"))

	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "audit", "--limit", "2", "-o", "json")), &items))
	require.Len(t, items, 2)
	require.Equal(t, "queue.pause", items[1]["action"])
	code, stdout, stderr = b.run(t, "audit", "--limit", "1", "--all", "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), &items))
	require.Len(t, items, 3)

	// The audit log needs the admin role.
	code, stdout, stderr = b.runWith(t, map[string]string{"DTQ_TOKEN": readerToken}, "audit")
	requireAPIError(t, code, stdout, stderr, "FORBIDDEN")
}

func TestWorkerLiveness(t *testing.T) {
	t.Parallel()
	cases := []struct {
		live   bool
		status string
		want   string
	}{
		{true, "busy", "live"},
		{false, "stopped", "stopped"},
		{false, "busy", "stale"},
		{false, "draining", "stale"},
	}
	for _, c := range cases {
		w := &workerView{dtqtype.WorkerInfo{Live: c.live, Status: c.status}}
		require.Equal(t, c.want, w.liveness(), "%+v", c)
	}
}
