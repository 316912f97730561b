package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

func TestDLQ(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-dlq-worker", "mail", "billing")

	// always_fail with one attempt is dead-lettered by the worker.
	var dead []string
	for _, q := range []string{"mail", "mail", "billing"} {
		id := b.submit(t, dtq.Submission{Queue: q, Type: "always_fail", MaxAttempts: 1})
		b.waitStatus(t, id, dtqtype.StatusDeadLettered)
		dead = append(dead, id)
	}
	golden(t, "dlq_list", b.ok(t, "dlq", "list", "--queue", "mail"))

	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "list", "--error-class", "AlwaysFail", "-o", "json")), &items))
	require.Len(t, items, 3)
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "list", "--type", "echo", "-o", "json")), &items))
	require.Empty(t, items)

	out := b.ok(t, "dlq", "get", dead[0])
	require.Contains(t, out, "status:           dead_lettered\n")
	require.Contains(t, out, "error:            AlwaysFail: always_fail failed on attempt 1 as designed\n")
	require.Regexp(t, `(?m)^failed_at:\s+\S+Z$`, out)
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "get", dead[0], "-o", "json")), &entry))
	require.Equal(t, dead[0], entry["task_id"])
	require.NotNil(t, entry["failed_at"])

	// A dead-lettered task is terminal: it cannot be cancelled.
	code, stdout, stderr := b.run(t, "tasks", "cancel", dead[0])
	requireAPIError(t, code, stdout, stderr, "TASK_TERMINAL")

	// Discard one, then requeue the rest of "mail" by id... and by filter.
	require.Equal(t, "discarded task "+dead[0]+" from the dead-letter queue\n", b.ok(t, "dlq", "discard", dead[0]))
	code, stdout, stderr = b.run(t, "dlq", "discard", dead[0])
	requireAPIError(t, code, stdout, stderr, "DLQ_ENTRY_NOT_FOUND")
	code, stdout, stderr = b.run(t, "dlq", "get", "0190a5c4e2c07000800000000000ffff")
	requireAPIError(t, code, stdout, stderr, "DLQ_ENTRY_NOT_FOUND")

	var requeued map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "requeue", dead[1], "-o", "json")), &requeued))
	task := requeued["task"].(map[string]any)
	require.Equal(t, dead[1], task["task_id"])
	require.Equal(t, 1.0, task["previous_attempts"])
	b.waitStatus(t, dead[1], dtqtype.StatusDeadLettered) // it fails again

	// previous_attempts counts requeues: the task ran twice, one attempt
	// in each of its two rounds; the attempt history keeps both.
	out = b.ok(t, "tasks", "get", dead[1])
	require.Contains(t, out, "\nattempt:          1/1\nrequeued:         1 time\n")
	require.NotContains(t, out, "previous_attempts")
	require.Regexp(t, `(?m)^1\s+dead_lettered\s+cli-dlq-worker\s+\S+\s+\d+\s+AlwaysFail: [^\n]*\n1\s+dead_lettered\s+cli-dlq-worker\s`, out)
	// The text answer of a requeue says which round starts, not "earlier
	// attempts" (the worker may already run it).
	require.Regexp(t, `^requeued task `+dead[1]+`: (queued|running|dead_lettered), attempt 1/1 of round 3 \(requeued 2 times\)\n$`,
		b.ok(t, "dlq", "requeue", dead[1]))
	b.waitStatus(t, dead[1], dtqtype.StatusDeadLettered)

	require.Equal(t, "requeued 2 of 2 matching dead-letter entries\n",
		b.ok(t, "dlq", "requeue", "--all", "--error-class", "AlwaysFail"))
	b.waitStatus(t, dead[1], dtqtype.StatusDeadLettered)
	b.waitStatus(t, dead[2], dtqtype.StatusDeadLettered)

	// Purge needs --yes; nothing is discarded without it.
	code, stdout, stderr = b.run(t, "dlq", "purge", "--queue", "billing")
	require.Equal(t, 2, code)
	require.Empty(t, stdout)
	require.Equal(t, "dtq: refusing to discard the matching dead-letter entries without --yes\n", stderr)
	code, _, stderr = b.run(t, "dlq", "purge")
	require.Equal(t, 2, code)
	require.Equal(t, "dtq: refusing to discard every dead-letter entry without --yes\n", stderr)
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "list", "-o", "json")), &items))
	require.Len(t, items, 2)

	var bulk map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "purge", "--queue", "billing", "--yes", "-o", "json")), &bulk))
	require.Equal(t, map[string]any{"matched": 1.0, "processed": 1.0, "next_cursor": nil}, bulk)
	require.Equal(t, "discarded 1 of 1 matching dead-letter entries\n", b.ok(t, "dlq", "purge", "--yes"))
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "dlq", "list", "-o", "json")), &items))
	require.Empty(t, items)
	require.Equal(t, "TASK_ID  QUEUE  TYPE  ERROR_CLASS  ATTEMPTS  FAILED_AT  ERROR\n", b.ok(t, "dlq", "list"))
}

func TestDLQRequeueUsage(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DTQ_API_URL": "http://127.0.0.1:1"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "requeue"}, "dtq: give a task id, or --all to requeue every matching entry\n"},
		{[]string{"dlq", "requeue", "x", "--all"}, "dtq: give a task id or --all, not both\n"},
		{[]string{"dlq", "requeue", "x", "--queue", "mail"}, "dtq: --queue, --type and --error-class filter --all; a task id needs none\n"},
		{[]string{"dlq", "discard"}, "dtq: accepts 1 arg(s), received 0\n"},
	} {
		code, stdout, stderr := runCmd(t, vars, tt.args...)
		require.Equal(t, 2, code, "%v: %s", tt.args, stderr)
		require.Empty(t, stdout)
		require.Equal(t, tt.want, stderr)
	}
}
