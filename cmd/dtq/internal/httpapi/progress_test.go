package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

type logPageJSON struct {
	Items      []dtqtype.LogLine `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

func (b *bundle) taskLogs(t *testing.T, id, query string) logPageJSON {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"/logs"+query, "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var v logPageJSON
	require.NoError(t, json.Unmarshal(res.body, &v))
	require.NotNil(t, v.NextCursor, "next_cursor is always set")
	return v
}

func lines(p logPageJSON) []string {
	out := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		out = append(out, it.Line)
	}
	return out
}

// lastWriteAt moves the time of the attempt's last progress write (the
// ms in the task hash's pq field) to ms, so a test decides whether the
// next write falls within the one-second window without waiting.
func (b *bundle) lastWriteAt(t *testing.T, queue, id, ms string) {
	t.Helper()
	key := b.keys.Task(queue, id)
	pq, err := b.rc.HGet(b.ctx, key, "pq").Result()
	require.NoError(t, err)
	re := regexp.MustCompile(`:(\d+):(\d+):(\d+)$`) // seq, ms, dropped
	m := re.FindStringSubmatch(pq)
	require.NotNil(t, m, pq)
	pq = pq[:len(pq)-len(m[0])] + ":" + m[1] + ":" + ms + ":" + m[3]
	require.NoError(t, b.rc.HSet(b.ctx, key, "pq", pq).Err())
}

func TestHTTPWorkerProgressAndLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "copy", Queue: "files"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["files"], "lease": "30s"}`)
	require.Len(t, tasks, 1)
	tok := tasks[0].LeaseToken
	path := "/api/v1/tasks/" + id + "/progress"

	// A report, then the same report sent again after a lost reply: the
	// lines land once.
	for range 2 {
		res := b.do(t, http.MethodPost, path, tokenBody(tok, `, "progress": 30, "logs": ["copied a", "copied b"], "seq": 1`))
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.JSONEq(t, `{"written": true}`, string(res.body))
	}
	require.Equal(t, []string{"copied a", "copied b"}, lines(b.taskLogs(t, id, "")))

	// Within a second of the last write: 429, nothing written.
	b.lastWriteAt(t, "files", id, "99999999999999")
	res := b.do(t, http.MethodPost, path, tokenBody(tok, `, "progress": 60, "logs": ["copied c"], "seq": 2`))
	e := res.requireError(t, http.StatusTooManyRequests, codeProgressTooSoon, "")
	require.NotEmpty(t, res.header.Get("Retry-After"))
	require.Contains(t, e.Message, "nothing was written")
	require.Equal(t, []string{"copied a", "copied b"}, lines(b.taskLogs(t, id, "")))

	// Past the window: it lands; on a heartbeat too.
	b.lastWriteAt(t, "files", id, "0")
	res = b.do(t, http.MethodPost, path, tokenBody(tok, `, "progress": {"files": 3, "of": 4}, "logs": ["copied c"], "seq": 2`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	b.lastWriteAt(t, "files", id, "0")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tok, `, "progress": 90, "logs": ["copied d"], "seq": 3`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var hb struct {
		ProgressWritten *bool `json:"progress_written"`
	}
	require.NoError(t, json.Unmarshal(res.body, &hb))
	require.NotNil(t, hb.ProgressWritten)
	require.True(t, *hb.ProgressWritten)
	// A heartbeat within the window renews and says the report waits.
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tok, `, "logs": ["copied e"], "seq": 4`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.NoError(t, json.Unmarshal(res.body, &hb))
	require.False(t, *hb.ProgressWritten)

	ti := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "")
	require.Equal(t, http.StatusOK, ti.status)
	var task struct {
		Progress    json.RawMessage `json:"progress"`
		ProgressAt  *string         `json:"progress_at"`
		LogAttempts int             `json:"log_attempts"`
	}
	require.NoError(t, json.Unmarshal(ti.body, &task))
	require.JSONEq(t, "90", string(task.Progress))
	require.NotNil(t, task.ProgressAt)
	require.Equal(t, 1, task.LogAttempts)

	// Pages of two lines, resumed by the cursor; one attempt's alone.
	page := b.taskLogs(t, id, "?limit=2")
	require.Equal(t, []string{"copied a", "copied b"}, lines(page))
	page = b.taskLogs(t, id, "?limit=2&cursor="+url.QueryEscape(*page.NextCursor))
	require.Equal(t, []string{"copied c", "copied d"}, lines(page))
	require.Equal(t, 1, page.Items[0].Attempt)
	require.Empty(t, b.taskLogs(t, id, "?attempt=1&cursor="+url.QueryEscape(*page.NextCursor)).Items)
	require.Equal(t, []string{"copied a", "copied b", "copied c", "copied d"}, lines(b.taskLogs(t, id, "?attempt=1")))
	require.Empty(t, b.taskLogs(t, id, "?attempt=2").Items)

	// Once the attempt ended, a report is 409 and writes nothing.
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tok, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	before := b.rc.HGetAll(b.ctx, b.keys.Task("files", id)).Val()
	b.rc.HSet(b.ctx, b.keys.Task("files", id), "pq", "x:0:0:0") // no window: only the fence refuses
	before["pq"] = "x:0:0:0"
	res = b.do(t, http.MethodPost, path, tokenBody(tok, `, "progress": 100, "logs": ["late"], "seq": 9`))
	e = res.requireError(t, http.StatusConflict, codeLeaseLost, "")
	require.Contains(t, e.Message, "nothing was written")
	require.Equal(t, before, b.rc.HGetAll(b.ctx, b.keys.Task("files", id)).Val())
	require.Equal(t, []string{"copied a", "copied b", "copied c", "copied d"}, lines(b.taskLogs(t, id, "")))
	require.Contains(t, b.events(t, "files", id), "TASK_PROGRESS")
}

func TestHTTPProgressValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "copy", Queue: "files"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["files"], "lease": "30s"}`)
	require.Len(t, tasks, 1)
	tok := tasks[0].LeaseToken
	big := `{"x": "` + strings.Repeat("y", dtq.MaxProgressBytes) + `"}`
	long := strings.Repeat("z", dtq.MaxLogLineBytes+1)
	for _, tc := range []struct {
		name, rest, field string
	}{
		{"progress over 100", `, "progress": 101`, "progress"},
		{"negative progress", `, "progress": -1`, "progress"},
		{"string progress", `, "progress": "half"`, "progress"},
		{"array progress", `, "progress": [1]`, "progress"},
		{"object over 4 KiB", `, "progress": ` + big, "progress"},
		{"object nesting past the payload's bound", `, "progress": {"a": ` + strings.Repeat("[", dtq.MaxJSONDepth) + strings.Repeat("]", dtq.MaxJSONDepth) + `}`, "progress"},
		{"object nesting 2,000 levels", `, "progress": {"a": ` + strings.Repeat("[", 1999) + strings.Repeat("]", 1999) + `}`, "progress"},
		{"line over 1 KiB", `, "logs": ["ok", "` + long + `"]`, "logs"},
		{"null line", `, "logs": ["ok", null]`, "logs"},
		{"negative seq", `, "logs": ["a"], "seq": -1`, "seq"},
		{"line time not RFC 3339", `, "logs": ["ok", {"ts": "yesterday", "line": "x"}]`, "logs[1].ts"},
		{"line time in ms", `, "logs": [{"ts": 1767366245123, "line": "x"}]`, "logs[0].ts"},
		{"line time missing", `, "logs": [{"line": "x"}]`, "logs[0].ts"},
		{"line time null", `, "logs": [{"ts": null, "line": "x"}]`, "logs[0].ts"},
		{"line time an hour ahead", `, "logs": ["ok", {"ts": "` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `", "line": "x"}]`, "logs[1].ts"},
		{"line object without a line", `, "logs": [{"ts": "2026-01-02T15:04:05Z"}]`, "logs[0].line"},
		{"line object with a null line", `, "logs": [{"ts": "2026-01-02T15:04:05Z", "line": null}]`, "logs[0].line"},
		{"line object with another member", `, "logs": [{"ts": "2026-01-02T15:04:05Z", "line": "x", "level": "info"}]`, "logs[0].level"},
		{"timed line over 1 KiB", `, "logs": [{"ts": "2026-01-02T15:04:05Z", "line": "` + long + `"}]`, "logs"},
		{"number line", `, "logs": [7]`, "logs"},
	} {
		for _, route := range []string{"progress", "heartbeat"} {
			res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/"+route, tokenBody(tok, tc.rest))
			res.requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
		}
	}
	require.Empty(t, b.taskLogs(t, id, "").Items)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/progress", tokenBody(tok, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, `{"written": false}`, string(res.body))

	for _, q := range []string{"?attempt=0", "?attempt=x", "?limit=0", "?limit=1001", "?cursor=nope", "?attempt=2&cursor=1:0",
		"?cursor=99:99", "?cursor=1:1", "?attempt=1&cursor=1:1"} {
		res := b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"/logs"+q, "")
		require.Equal(t, http.StatusBadRequest, res.status, q+": "+string(res.body))
	}
	res = b.do(t, http.MethodGet, "/api/v1/tasks/"+strings.Repeat("0", 32)+"/logs", "")
	res.requireError(t, http.StatusNotFound, codeTaskNotFound, "")
}

// TestHTTPWorkerTimedLogLines: a line sent as {"ts", "line"} keeps the
// worker's time (to the millisecond), a plain string gets the write's,
// and a time within the allowed skew ahead of the server's clock is kept.
func TestHTTPWorkerTimedLogLines(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "copy", Queue: "files"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["files"], "lease": "30s"}`)
	require.Len(t, tasks, 1)
	tok := tasks[0].LeaseToken

	// A line logged after the task was created, with a sub-millisecond
	// fraction the store drops.
	logged := time.Now().UTC().Add(123456 * time.Nanosecond)
	ahead := time.Now().Add(dtq.MaxLogLineSkew / 2).UTC().Truncate(time.Millisecond)
	before := time.Now().Truncate(time.Millisecond)
	body := `, "logs": [{"ts": "` + logged.Format(time.RFC3339Nano) + `", "line": "timed"}, "plain", ` +
		`{"ts": "` + ahead.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano) + `", "line": "a fast clock"}, ` +
		`{"ts": "2020-01-02T03:04:05Z", "line": "before the task"}], "seq": 1`
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/progress", tokenBody(tok, body))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	after := time.Now()

	page := b.taskLogs(t, id, "")
	require.Equal(t, []string{"timed", "plain", "a fast clock", "before the task"}, lines(page))
	require.True(t, page.Items[0].TS.Equal(logged.Truncate(time.Millisecond)), "the worker's time is kept: %v, sent %v", page.Items[0].TS, logged)
	require.False(t, page.Items[1].TS.Before(before), "a plain line gets the time of the write")
	require.False(t, page.Items[1].TS.After(after), "a plain line gets the time of the write")
	require.True(t, page.Items[2].TS.Equal(ahead), "a time within the skew is kept: %v, sent %v", page.Items[2].TS, ahead)
	created := rdb.TaskIDTime(id)
	require.True(t, page.Items[3].TS.Equal(created), "a time before the task is its creation's: %v, created %v", page.Items[3].TS, created)
}
