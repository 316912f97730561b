package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestQueuesScaling(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for range 3 {
		b.submit(t, dtq.Submission{Queue: "scaled", Type: "echo"})
	}
	out := b.ok(t, "queues", "scaling", "scaled", "--concurrency", "2", "--drain", "5m")
	require.Regexp(t, `(?m)^queue:\s+scaled$`, out)
	require.Regexp(t, `(?m)^desired_workers:\s+1$`, out, "tasks are ready: never 0")
	require.Regexp(t, `(?m)^ready:\s+3$`, out)
	require.Regexp(t, `(?m)^concurrency:\s+2 a worker$`, out)

	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "scaling", "scaled", "-o", "json")), &s))
	require.Equal(t, "scaled", s["queue"])
	require.Equal(t, 1.0, s["desired_workers"])
	require.Equal(t, 16.0, s["per_worker_concurrency"])

	code, stdout, stderr := b.run(t, "queues", "scaling", "scaled", "--drain", "0s")
	requireAPIError(t, code, stdout, stderr, "INVALID_REQUEST")
	code, stdout, stderr = b.run(t, "queues", "scaling", "nowhere")
	requireAPIError(t, code, stdout, stderr, "QUEUE_NOT_FOUND")
}
