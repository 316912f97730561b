package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// TestProgressShown: a task's progress, as the example sleep reports it,
// shows in tasks get, in tasks watch and in events tail.
func TestProgressShown(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-progress-worker", "progress")
	first := b.submit(t, dtq.Submission{Queue: "progress", Type: "echo"}) // registers the queue
	b.waitStatus(t, first, dtqtype.StatusSucceeded)
	cursor := firstSSEID(t, b.srv.URL+"/api/v1/events?queue=progress")
	tail := startTail(t, b.vars, "--queue", "progress", "--cursor", cursor)

	// sleep reports 100 as it returns; the worker writes that before the
	// task's outcome, so the watch's last line, seen once the task ended,
	// has it.
	id := b.submit(t, dtq.Submission{Queue: "progress", Type: "sleep", Payload: map[string]any{"seconds": 0.2}})
	out := b.ok(t, "tasks", "watch", id)
	ls := lines(out)
	require.Regexp(t, `^\S+Z  succeeded      attempt 1/5  worker cli-progress-worker  progress 100%  \d+ms$`, ls[len(ls)-1])

	out = b.ok(t, "tasks", "get", id)
	require.Contains(t, out, "\nprogress:         100%\n")
	require.Regexp(t, `(?m)^progress_at:\s+\S+Z$`, out)
	require.Less(t, strings.Index(out, "\nattempt:"), strings.Index(out, "\nprogress:"), "progress follows the attempt")

	tail.waitMatch(t, `TASK_SUCCEEDED\s+progress\s+sleep\s+`+id)
	var progressLine, successLine string
	for _, l := range lines(tail.stdout.String()) {
		switch {
		case strings.Contains(l, "TASK_PROGRESS") && strings.Contains(l, id):
			progressLine = l
		case strings.Contains(l, "TASK_SUCCEEDED") && strings.Contains(l, id):
			successLine = l
		}
	}
	require.Regexp(t, `\s+1\s+cli-progress-worker\s+progress 100%$`, progressLine)
	require.Regexp(t, `\s+1\s+cli-progress-worker\s+duration_ms=\d+$`, successLine)
}

func TestProgressText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{`40`, "40%"},
		{`42.5`, "42.5%"},
		{`0`, "0%"},
		{`{"parts": 3, "of": 10}`, `{"parts":3,"of":10}`},
		{`null`, ""},
		{``, ""},
	} {
		require.Equal(t, tt.want, progressText(json.RawMessage(tt.in)), tt.in)
	}
}

func TestEventDetail(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, typ, metadata, want string
	}{
		{"a number", "TASK_PROGRESS", `{"progress": 40}`, "progress 40%"},
		{"an object", "TASK_PROGRESS", `{"progress": {"parts": 3, "of": 10}}`, `progress {"parts":3,"of":10}`},
		{"other metadata by key", "TASK_RETRY_SCHEDULED", `{"retry_delay_ms": 2000, "next_attempt": 3, "error_class": "Timeout"}`,
			"error_class=Timeout next_attempt=3 retry_delay_ms=2000"},
		{"nested values as JSON", "TASK_LEASE_LOST", `{"previous_worker": "w-1", "x": {"a": [1, 2]}}`, `previous_worker=w-1 x={"a":[1,2]}`},
		{"none", "TASK_STARTED", `{}`, ""},
		{"control characters escaped", "TASK_CANCELLED", `{"reason": "a\u001b]0;pwned\u0007b"}`, `reason=a\x1b]0;pwned\x07b`},
		{"cut at the column's width", "TASK_CANCELLED", `{"reason": "` + strings.Repeat("x", 200) + `"}`,
			"reason=" + strings.Repeat("x", maxEventDetail-len("reason=")-1) + "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := eventView{TS: "2026-11-30T04:35:30.265Z", Type: tt.typ, Queue: "q", TaskType: "t",
				TaskID: "01a22abc8f597000af03a7373a890002", Attempt: 1, WorkerID: "w"}
			require.NoError(t, json.Unmarshal([]byte(tt.metadata), &ev.Metadata))
			line := ev.line()
			start := strings.Index(eventHeader, "DETAIL") // the column's, under its header
			head, detail := line, ""
			if len(line) > start {
				head, detail = line[:start], line[start:]
			}
			require.Equal(t, []string{"2026-11-30T04:35:30.265Z", tt.typ, "q", "t", "01a22abc8f597000af03a7373a890002", "1", "w"},
				strings.Fields(head))
			require.Equal(t, tt.want, detail)
		})
	}
}
