package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestTasksLogs(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-logs-worker", "default")

	// -f follows a running sleep until it finishes: both its lines.
	id := b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 1.5}})
	out := b.ok(t, "tasks", "logs", id, "-f", "--interval", "100ms")
	ls := lines(out)
	require.Len(t, ls, 2, out)
	require.Regexp(t, `^\S+Z  #1  level=INFO msg=sleeping seconds=1\.5$`, ls[0])
	require.Regexp(t, `^\S+Z  #1  level=INFO msg=slept seconds=1\.5$`, ls[1])

	// Without -f: what there is; one attempt's; JSON items.
	require.Equal(t, out, b.ok(t, "tasks", "logs", id))
	require.Empty(t, b.ok(t, "tasks", "logs", id, "--attempt", "2"))
	var item struct {
		Attempt int    `json:"attempt"`
		Line    string `json:"line"`
	}
	js := lines(b.ok(t, "tasks", "logs", id, "-o", "json"))
	require.Len(t, js, 2)
	require.NoError(t, json.Unmarshal([]byte(js[1]), &item))
	require.Equal(t, 1, item.Attempt)
	require.Equal(t, "level=INFO msg=slept seconds=1.5", item.Line)

	code, stdout, stderr := b.run(t, "tasks", "logs", "0199d5e8a93c7d2a8f0e4b2c1d3e5f60")
	requireAPIError(t, code, stdout, stderr, "TASK_NOT_FOUND")
	code, _, _ = b.run(t, "tasks", "logs", id, "--attempt", "-1")
	require.NotZero(t, code)
}
