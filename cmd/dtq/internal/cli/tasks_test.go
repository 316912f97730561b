package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

func TestTasksSubmitAndGet(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	payloadFile := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(payloadFile, []byte("{\n  \"order_id\": 42\n}\n"), 0o600))

	out := b.ok(t, "tasks", "submit", "send_receipt", "--payload", "@"+payloadFile, "--queue", "emails",
		"--priority", "7", "--max-attempts", "3", "--timeout-ms", "5000", "--delay", "1h", "--ttl", "2h",
		"--metadata", `{"source": "cli"}`, "--idempotency-key", "order-42")
	golden(t, "tasks_submit", out)
	id := hexID.FindString(out)

	// The same submission again: the task has not run, so the key is in
	// progress.
	code, stdout, stderr := b.run(t, "tasks", "submit", "send_receipt", "--payload", `{"order_id": 42}`, "--queue", "emails",
		"--priority", "7", "--max-attempts", "3", "--timeout-ms", "5000", "--delay", "1h", "--ttl", "2h",
		"--idempotency-key", "order-42")
	requireAPIError(t, code, stdout, stderr, "IDEMPOTENCY_IN_PROGRESS")
	require.Contains(t, stderr, "retry later to get its outcome (task "+id+") (request ", "the error names the key's task")

	out = b.ok(t, "tasks", "get", id)
	golden(t, "tasks_get_pending", out)

	var task map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "get", id, "-o", "json")), &task))
	require.Equal(t, id, task["task_id"])
	require.Equal(t, "pending", task["status"])
	require.Equal(t, map[string]any{"order_id": 42.0}, task["payload"])
	require.Equal(t, 7.0, task["priority"])
	require.Equal(t, "order-42", task["idempotency_key"])
	require.NotContains(t, task, "duplicate", "-o json prints the API's answer as it is")

	// A cancelled task replays its key: 200, "duplicate (replayed)".
	b.ok(t, "tasks", "cancel", id, "--reason", "ordered twice")
	out = b.ok(t, "tasks", "submit", "send_receipt", "--payload", `{"order_id": 42}`, "--queue", "emails",
		"--priority", "7", "--max-attempts", "3", "--timeout-ms", "5000", "--delay", "1h", "--ttl", "2h",
		"--idempotency-key", "order-42")
	require.Equal(t, "duplicate (replayed): the idempotency key belongs to task "+id+", which is cancelled", lines(out)[0])
	out = b.ok(t, "tasks", "submit", "send_receipt", "--payload", `{"order_id": 42}`, "--queue", "emails",
		"--priority", "7", "--max-attempts", "3", "--timeout-ms", "5000", "--delay", "1h", "--ttl", "2h",
		"--idempotency-key", "order-42", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &task))
	require.Equal(t, true, task["duplicate"])
	require.Equal(t, id, task["task_id"])
}

func TestTasksSubmitDefaultsAreTheAPIs(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	var task map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "submit", "echo", "-o", "json")), &task))
	require.Equal(t, "default", task["queue"])
	require.Equal(t, 5.0, task["priority"])
	require.Equal(t, "queued", task["status"])
	require.Equal(t, map[string]any{}, task["payload"])
	require.Equal(t, false, task["duplicate"])

	// The API validates, exactly as for any client.
	code, stdout, stderr := b.run(t, "tasks", "submit", "echo", "--priority", "12")
	requireAPIError(t, code, stdout, stderr, "INVALID_TASK")
	require.Contains(t, stderr, "priority")
}

func TestTasksListAndActions(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	queued := b.submit(t, dtq.Submission{Queue: "reports", Type: "echo", Payload: map[string]any{"n": 1}})
	pending := b.submit(t, dtq.Submission{Queue: "reports", Type: "sleep", Payload: map[string]any{"seconds": 1}, Delay: time.Hour})
	doomed := b.submit(t, dtq.Submission{Queue: "reports", Type: "echo", Priority: new(9)})
	other := b.submit(t, dtq.Submission{Queue: "other", Type: "echo"})

	require.Equal(t, "task "+doomed+" is cancelled\n", b.ok(t, "tasks", "cancel", doomed))
	golden(t, "tasks_list", b.ok(t, "tasks", "list", "--queue", "reports"))

	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "list", "-o", "json")), &items))
	require.Len(t, items, 4)
	require.Equal(t, []any{other, doomed, pending, queued},
		[]any{items[0]["task_id"], items[1]["task_id"], items[2]["task_id"], items[3]["task_id"]}, "newest first")

	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "list", "--status", "cancelled", "-o", "json")), &items))
	require.Len(t, items, 1)
	require.Equal(t, doomed, items[0]["task_id"])

	// Paging: one page and a hint on stderr, or every page with --all.
	code, stdout, stderr := b.run(t, "tasks", "list", "--limit", "1", "-o", "json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &items))
	require.Len(t, items, 1)
	require.Regexp(t, `^dtq: more results: dtq tasks list --cursor \S+ \(or --all\)\n$`, stderr)
	cursor := strings.Fields(stderr)[7]
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "list", "--limit", "1", "--cursor", cursor, "-o", "json")), &items))
	require.Equal(t, doomed, items[0]["task_id"])
	code, stdout, stderr = b.run(t, "tasks", "list", "--limit", "1", "--all", "-o", "json")
	require.Equal(t, 0, code)
	require.Empty(t, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), &items))
	require.Len(t, items, 4)

	// run-now makes the delayed task due; it is then queued, so a second
	// run-now is a conflict, and so is deleting a task that has not finished.
	require.Equal(t, "task "+pending+" is due now (queued)\n", b.ok(t, "tasks", "run-now", pending))
	code, stdout, stderr = b.run(t, "tasks", "run-now", pending)
	requireAPIError(t, code, stdout, stderr, "TASK_CONFLICT")
	code, stdout, stderr = b.run(t, "tasks", "delete", queued)
	requireAPIError(t, code, stdout, stderr, "TASK_CONFLICT")

	// Cancelling again is fine; delete removes a finished task.
	var cancelled map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "cancel", doomed, "-o", "json")), &cancelled))
	require.Equal(t, "cancelled", cancelled["task"].(map[string]any)["status"])
	require.Equal(t, "deleted task "+doomed+"\n", b.ok(t, "tasks", "delete", doomed))
	code, stdout, stderr = b.run(t, "tasks", "get", doomed)
	requireAPIError(t, code, stdout, stderr, "TASK_NOT_FOUND")
	var deleted map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "cancel", other, "-o", "json")), &cancelled))
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "tasks", "delete", other, "-o", "json")), &deleted))
	require.Equal(t, map[string]any{"task_id": other, "deleted": true}, deleted)
}

func TestTasksFinishedTaskAndWatch(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-watch-worker", "default")

	// flaky fails its first attempt and succeeds on the second.
	flaky := b.submit(t, dtq.Submission{Type: "flaky", Payload: map[string]any{"fail_times": 1}, MaxAttempts: 3})
	out := b.ok(t, "tasks", "watch", flaky)
	last := lines(out)[len(lines(out))-1]
	require.Regexp(t, `^\S+Z  succeeded      attempt 2/3  worker cli-watch-worker  \d+ms$`, last)

	out = b.ok(t, "tasks", "get", flaky, "--wait", "5s")
	require.Contains(t, out, "status:           succeeded\n")
	require.Contains(t, out, "result:           {")
	require.Regexp(t, `(?m)^1\s+retry\s+cli-watch-worker\s+\S+\s+\d+\s+FlakyFailure: planned failure 1 of 1$`, out)
	require.Regexp(t, `(?m)^2\s+succeeded\s+cli-watch-worker\s+`, out)

	// Terminal now: cancel is refused.
	code, stdout, stderr := b.run(t, "tasks", "cancel", flaky)
	requireAPIError(t, code, stdout, stderr, "TASK_TERMINAL")

	// --exit-status turns a failed task into exit 1; -o json prints each
	// change as one JSON line.
	failing := b.submit(t, dtq.Submission{Type: "always_fail", MaxAttempts: 1})
	code, stdout, stderr = b.run(t, "tasks", "watch", failing, "--exit-status", "-o", "json")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, "dtq: task "+failing+" ended dead_lettered\n", stderr)
	var final map[string]any
	ls := lines(stdout)
	for _, l := range ls {
		require.NoError(t, json.Unmarshal([]byte(l), &final), l)
	}
	require.Equal(t, "dead_lettered", final["status"])

	// A running task gets a cancel request; its handler stops and the task
	// ends cancelled.
	running := b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 60}, Timeout: 2 * time.Minute})
	b.waitStatus(t, running, dtqtype.StatusRunning)
	// The answer may already see the task cancelled: the handler stops
	// within moments.
	require.Contains(t, []string{"cancel requested for task " + running + ": it is running; its handler is told to stop\n",
		"task " + running + " is cancelled\n"}, b.ok(t, "tasks", "cancel", running, "--reason", "too slow"))
	out = b.ok(t, "tasks", "watch", running, "--interval", "100ms")
	require.Regexp(t, `  cancelled      attempt 1/5  worker cli-watch-worker  \d+ms  Cancelled: \S.*\n$`, out)

	// The long-poll answers as soon as the task finishes.
	slow := b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 0.2}})
	out = b.ok(t, "tasks", "get", slow, "--wait", "20s", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &final))
	require.Equal(t, "succeeded", final["status"])
	b.waitStatus(t, slow, dtqtype.StatusSucceeded)
}

func TestSubmitFlagErrors(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DTQ_API_URL": "http://127.0.0.1:1"} // never reached: usage errors come first
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "submit"}, "accepts 1 arg(s), received 0"},
		{[]string{"tasks", "submit", "echo", "--payload", "{oops"}, "--payload: not valid JSON"},
		{[]string{"tasks", "submit", "echo", "--payload", "@/no/such/file.json"}, "--payload: open /no/such/file.json"},
		{[]string{"tasks", "submit", "echo", "--metadata", "nope"}, "--metadata: not valid JSON"},
		{[]string{"tasks", "submit", "echo", "--payload", "[1, 2]"}, "payload: must be a JSON object"},
		{[]string{"tasks", "submit", "echo", "--run-at", "tomorrow"}, `--run-at="tomorrow": must be an RFC 3339 time`},
		{[]string{"tasks", "submit", "echo", "--dedup-mode", "debounce", "--dedup-window", "soon"}, `--dedup-window="soon": must be a positive duration`},
		{[]string{"tasks", "submit", "echo", "--delay", "soon"}, `--delay="soon": must be a duration`},
		{[]string{"tasks", "submit", "echo", "--delay", "-5s"}, `--delay="-5s": must not be negative`},
		{[]string{"tasks", "submit", "echo", "--ttl", "1.5s"}, `--ttl="1.5s": must be a positive whole number of seconds`},
		{[]string{"tasks", "submit", "echo", "--priority", "high"}, `invalid argument "high" for "--priority"`},
		{[]string{"tasks", "get", "x", "--wait", "-1s"}, "--wait=-1s: must not be negative"},
		{[]string{"tasks", "watch", "x", "--interval", "0s"}, "--interval=0s: must be between 100ms and 1m0s"},
		{[]string{"tasks", "list", "-o", "yaml"}, `--output="yaml": must be table or json`},
		{[]string{"tasks", "list", "--status", "bogus"}, `--status="bogus": must be one of waiting, pending, queued,`},
		{[]string{"tasks", "list", "--timeout", "0s"}, "--timeout=0s: must be positive"},
		{[]string{"tasks", "list", "--api-url", "ftp://host"}, `--api-url/DTQ_API_URL "ftp://host": must be an http:// or https:// URL`},
		{[]string{"tasks", "list", "extra"}, `unknown command "extra" for "dtq tasks list"`},
		{[]string{"tasks", "lsit"}, `unknown command "lsit" for "dtq tasks"`},
		{[]string{"queues", "purge"}, "accepts 1 arg(s), received 0"},
		{[]string{"tasks", "list", "--no-such-flag"}, "unknown flag: --no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, vars, tt.args...)
			require.Equal(t, 2, code, stderr)
			require.Empty(t, stdout)
			if !strings.Contains(stderr, "Did you mean this?") { // suggestions keep their own lines
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			}
			require.True(t, strings.HasPrefix(stderr, "dtq: "), stderr)
			require.Contains(t, stderr, tt.want)
		})
	}
}

func TestParseDurationArg(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"90", 90 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"NaN", 0, false},
		{"1e300", 0, false},
	}
	for _, tt := range tests {
		got, err := parseDurationArg("--delay", tt.in)
		if !tt.ok {
			require.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

// TestTasksSubmitDedup: --dedup-* build the submission's dedup; a collapsed
// submission says so and names its key's task.
func TestTasksSubmitDedup(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	out := b.ok(t, "tasks", "submit", "reindex", "--payload", `{"doc": 7}`, "--dedup-by", "task_type,payload.doc", "--dedup-mode", "drop")
	id := hexID.FindString(out)
	require.Contains(t, out, "submitted task "+id)
	require.Contains(t, out, `dedup_key`)
	require.Contains(t, out, `by:task_type="reindex"&payload.doc=7`)
	out = b.ok(t, "tasks", "submit", "reindex", "--payload", `{"doc": 7, "v": 2}`, "--dedup-by", "task_type", "--dedup-by", "payload.doc", "--dedup-mode", "drop")
	require.Contains(t, out, "deduplicated (drop): the dedup key's task is "+id+", which is queued; nothing was created")

	code, stdout, stderr := b.run(t, "tasks", "submit", "reindex", "--dedup-key", "k", "--dedup-mode", "throttle")
	requireAPIError(t, code, stdout, stderr, "INVALID_TASK")
	require.Contains(t, stderr, "dedup.ttl")
	code, _, stderr = b.run(t, "tasks", "submit", "reindex", "--dedup-key", "k")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--dedup-mode")
}
