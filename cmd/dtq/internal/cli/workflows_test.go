package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
)

// writeWorkflow writes a workflow file for `dtq workflows submit -f`.
func writeWorkflow(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workflow.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const pairWorkflow = `{"name": "order-42", "nodes": [
  {"ref": "fetch", "queue": "io", "task_type": "fetch", "payload": {"url": "https://example.com/a.png"}},
  {"ref": "resize", "queue": "cpu", "task_type": "resize", "deps": ["fetch"]}
]}`

func TestWorkflowsSubmitGetListCancel(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	file := writeWorkflow(t, pairWorkflow)

	out := b.ok(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	golden(t, "workflows_submit", out)
	id := hexID.FindString(out)
	require.NotEmpty(t, id)

	// The same key while it runs: in progress.
	code, stdout, stderr := b.run(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	requireAPIError(t, code, stdout, stderr, "IDEMPOTENCY_IN_PROGRESS")
	require.Contains(t, stderr, id)

	out = b.ok(t, "workflows", "get", id)
	golden(t, "workflows_get_running", out)
	require.Equal(t, "workflow "+id+" is running: 0 of 2 nodes ended", lines(out)[0])

	var w map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workflows", "get", id, "-o", "json")), &w))
	require.Equal(t, id, w["workflow_id"])
	require.Equal(t, "running", w["status"])
	require.Len(t, w["nodes"], 2)

	// A short wait on a running workflow shows it as it is.
	require.Contains(t, b.ok(t, "workflows", "get", id, "--wait", "100ms"), "is running")

	out = b.ok(t, "workflows", "list", "--status", "running")
	require.Equal(t, []string{"WORKFLOW_ID                       NAME      STATUS", id + "  order-42  running"}, lines(out))
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workflows", "list", "--name", "order-42", "-o", "json")), &items))
	require.Len(t, items, 1)
	require.NotContains(t, b.ok(t, "workflows", "list", "--status", "failed"), id)

	// The API process's maintenance (as dtq api runs it) relays the
	// nodes' ends to the workflow.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	out = b.ok(t, "workflows", "cancel", id)
	require.Regexp(t, `^(workflow `+id+` cancelled|cancel requested: workflow `+id+` ends cancelled once its nodes' ends are recorded \(dtq workflows get `+id+` --wait 30s\))\n`, out)
	out = b.ok(t, "workflows", "get", id, "--wait", "30s")
	require.Equal(t, "workflow "+id+" cancelled: 2 of 2 nodes ended", lines(out)[0])
	// Ended: the key replays it.
	out = b.ok(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	require.Equal(t, "duplicate (replayed): the idempotency key belongs to workflow "+id+", which is cancelled", lines(out)[0])
}

func TestWorkflowsErrors(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, stdout, stderr := b.run(t, "workflows", "submit", "-f", writeWorkflow(t, `{"nodes": [{"ref": "a", "task_type": "t", "deps": ["a"]}]}`))
	requireAPIError(t, code, stdout, stderr, "INVALID_WORKFLOW")
	code, _, stderr = b.run(t, "workflows", "submit")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--file is required")
	code, _, stderr = b.run(t, "workflows", "submit", "-f", writeWorkflow(t, `[1]`))
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "not a JSON object")
	code, _, stderr = b.run(t, "workflows", "submit", "-f", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--file")
	code, stdout, stderr = b.run(t, "workflows", "get", "0190a5c4e2c07000800000000000ffff")
	requireAPIError(t, code, stdout, stderr, "NOT_FOUND")
	code, stdout, stderr = b.run(t, "workflows", "cancel", "nope")
	requireAPIError(t, code, stdout, stderr, "NOT_FOUND")
	code, _, stderr = b.run(t, "workflows", "list", "--status", "sideways")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--status")
	code, _, _ = b.run(t, "workflows", "get", "x", "--wait", "-1s")
	require.Equal(t, exitUsage, code)
}

// TestAPIRunsWorkflowMaintenance: with only `dtq api` and an HTTP worker
// running (no Go worker), a workflow's second node is released when the
// first ends and the workflow ends succeeded: the API process relays its
// nodes' ends.
func TestAPIRunsWorkflowMaintenance(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apiworkflows"}, "api", "--api-addr", "127.0.0.1:0")
	r.waitHealthy(t)
	status, _, sub := r.do(t, http.MethodPost, "/api/v1/workflows", nil, pairWorkflow)
	require.Equal(t, http.StatusAccepted, status, "%v", sub)
	id, _ := sub["workflow_id"].(string)

	finish := func(queue, ref string) {
		t.Helper()
		var task map[string]any
		require.Eventually(t, func() bool {
			status, _, got := r.do(t, http.MethodPost, "/api/v1/claims", nil, `{"worker_id": "py-1", "queues": ["`+queue+`"], "wait": "1s"}`)
			require.Equal(t, http.StatusOK, status, "%v", got)
			tasks, _ := got["tasks"].([]any)
			if len(tasks) == 0 {
				return false
			}
			task = tasks[0].(map[string]any)
			return true
		}, 60*time.Second, time.Millisecond, "node %s was never released", ref)
		require.Equal(t, id, task["workflow_id"])
		require.Equal(t, ref, task["ref"])
		status, _, got := r.do(t, http.MethodPost, "/api/v1/tasks/"+task["task_id"].(string)+"/complete", nil,
			`{"lease_token": "`+task["lease_token"].(string)+`", "result": {"ref": "`+ref+`"}}`)
		require.Equal(t, http.StatusOK, status, "%v", got)
	}
	finish("io", "fetch")
	finish("cpu", "resize")
	require.Eventually(t, func() bool {
		status, _, w := r.do(t, http.MethodGet, "/api/v1/workflows/"+id+"?wait=5s", nil, "")
		require.Equal(t, http.StatusOK, status)
		return w["status"] == "succeeded"
	}, 60*time.Second, time.Millisecond)
	require.Equal(t, 0, r.stop(t))
}
