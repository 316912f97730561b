package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/cursor"
)

// b64 encodes a forged cursor in the base64 the API's cursors use.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestForgedCursorsAndLimits sends every list and bulk route forged
// cursors and out-of-range numbers: each is a 400 INVALID_REQUEST naming
// the field, never a 500 (a forged DLQ bulk offset of 1e17 once reached
// Redis as "1e+17").
func TestForgedCursorsAndLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"queue": "emails", "task_type": "a"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))

	type tc struct {
		method, path, body, field string
	}
	get := func(path, field string) tc { return tc{http.MethodGet, path, "", field} }
	bulkQ := func(route, cursor string) tc {
		return tc{http.MethodPost, route + "?queue=emails&cursor=" + url.QueryEscape(cursor), "", "cursor"}
	}
	bulkB := func(route, cursor string) tc {
		return tc{http.MethodPost, route, `{"queue": "emails", "cursor": "` + cursor + `"}`, "cursor"}
	}
	const id = "01a22aa1819e7000b8909fac70590002"
	huge := []string{
		cursor.Encode(cursor.DLQBulk, "0", "100000000000000000"),
		cursor.Encode(cursor.DLQBulk, "0", "9223372036854775807"),
		cursor.Encode(cursor.DLQBulk, "0", "-1"),
		cursor.Encode(cursor.DLQBulk, "-1", "0"),
		cursor.Encode(cursor.DLQBulk, "2", "0"), // one queue: index 1 is the end
		cursor.Encode(cursor.DLQBulk, "2147483648", "0"),
		cursor.Encode(cursor.DLQBulk, "0", "1e17"),
		cursor.Encode(cursor.DLQBulk, "0", "1.5"),
		cursor.Encode(cursor.DLQBulk, "0"),
		b64(`{"q":0,"o":0}`), // the cursor of earlier versions
		"not base64!",
	}
	var tests []tc
	for _, c := range huge {
		tests = append(tests, bulkQ("/api/v1/dlq/requeue", c), bulkB("/api/v1/dlq/purge", c))
	}
	for _, c := range []string{
		cursor.Encode(cursor.DLQ, "100000000000000000", "emails", id),
		cursor.Encode(cursor.DLQ, "-2", "emails", id),
		cursor.Encode(cursor.DLQ, "1e300", "emails", id),
		cursor.Encode(cursor.DLQ, "1", "Bad Queue", id),
		cursor.Encode(cursor.DLQ, "1", "emails", "x"),
		b64("d2:1:emails:" + id),
		"x",
		strings.Repeat("A", 10_000),
	} {
		tests = append(tests, get("/api/v1/dlq?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, c := range []string{
		cursor.Encode(cursor.Audit, "18446744073709551616", "0"),
		cursor.Encode(cursor.Audit, "-1", "0"),
		cursor.Encode(cursor.Audit, "1e17", "0"),
		"1-0",
		"x",
	} {
		tests = append(tests, get("/api/v1/audit?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, c := range []string{cursor.Encode(cursor.Tasks, "1e17"), cursor.Encode(cursor.Tasks, strings.Repeat("f", 32)),
		id, "x", strings.Repeat("0", 10_000)} {
		tests = append(tests, get("/api/v1/tasks?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, c := range []string{cursor.Encode(cursor.Queues, strings.Repeat("a", 100)), "x", b64("q1:emails")} {
		tests = append(tests, get("/api/v1/queues?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, c := range []string{cursor.Encode(cursor.Schedules, "Bad Name"), "x"} {
		tests = append(tests, get("/api/v1/schedules?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, c := range []string{cursor.Encode(cursor.Workers, ""), cursor.Encode(cursor.Workers, "\xff"), "x"} {
		tests = append(tests, get("/api/v1/workers?cursor="+url.QueryEscape(c), "cursor"))
	}
	for _, path := range []string{"/api/v1/tasks", "/api/v1/dlq", "/api/v1/audit", "/api/v1/queues", "/api/v1/schedules", "/api/v1/workers"} {
		for _, l := range []string{"0", "-1", "1001", "1e3", "9223372036854775808", "1.5", ""} {
			tests = append(tests, get(path+"?limit="+url.QueryEscape(l), "limit"))
		}
	}
	for _, w := range []string{"1e17", "-1", "121", "9223372036854775807ns0s", "NaN", "Inf", "3h", "1.5"} {
		tests = append(tests, get("/api/v1/stats?window="+url.QueryEscape(w), "window"))
	}
	for _, w := range []string{"1e17", "-1s", "61s", "NaN", "+Inf", "1e400"} {
		tests = append(tests, get("/api/v1/tasks/"+strings.Repeat("0", 32)+"?wait="+url.QueryEscape(w), "wait"))
	}
	for _, tt := range tests {
		res := b.do(t, tt.method, tt.path, tt.body)
		require.Equal(t, http.StatusBadRequest, res.status, "%s %s %s: %.300s", tt.method, tt.path, tt.body, res.body)
		var e struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		}
		res.decode(t, &e)
		require.Equal(t, codeInvalidRequest, e.Code, "%s %s", tt.method, tt.path)
		require.Equal(t, tt.field, e.Details["field"], "%s %s: %s", tt.method, tt.path, res.body)
	}
}

// TestDLQCursorCompact lists a dead-letter queue spread over 600 queues, a
// few entries at a page, with entries tied to the millisecond across and
// within queues: every entry comes once, newest first, and every cursor is
// a position of at most 256 bytes whatever the number of queues (it once
// carried an offset per queue: 72 KB at 4,300 queues).
func TestDLQCursorCompact(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	const queues = 600
	var tasks []string
	for i := range queues {
		tasks = append(tasks, fmt.Sprintf(`{"queue": "q%04d", "task_type": "a"}`, i))
	}
	var batch struct {
		Items []struct {
			Task struct {
				ID    string `json:"task_id"`
				Queue string `json:"queue"`
			} `json:"task"`
		} `json:"items"`
	}
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks": [`+strings.Join(tasks, ",")+`]}`)
	require.Equal(t, http.StatusOK, res.status, "%.300s", res.body)
	res.decode(t, &batch)
	// Index the tasks as dead letters, three distinct failure times.
	pipe := b.rc.Pipeline()
	for i, it := range batch.Items {
		pipe.ZAdd(b.ctx, b.keys.DLQ(it.Task.Queue), redis.Z{Score: float64(1_700_000_000_000 + i%3), Member: it.Task.ID})
	}
	_, err := pipe.Exec(b.ctx)
	require.NoError(t, err)

	seen := map[string]bool{}
	last := int64(1 << 62)
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, queues)
		q := url.Values{"limit": {"7"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l dlqListJSON
		res := b.do(t, http.MethodGet, "/api/v1/dlq?"+q.Encode(), "")
		require.Equal(t, http.StatusOK, res.status, "%.300s", res.body)
		res.decode(t, &l)
		for _, e := range l.Items {
			require.False(t, seen[e.TaskID], "entry %s twice", e.TaskID)
			seen[e.TaskID] = true
			at, err := time.Parse(time.RFC3339Nano, *e.FailedAt)
			require.NoError(t, err)
			require.LessOrEqual(t, at.UnixMilli(), last, "newest first")
			last = at.UnixMilli()
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
		require.LessOrEqual(t, len(cursor), 256, "page %d", pages)
	}
	require.Len(t, seen, queues)
}

// TestCursorOfAnotherList gives every list (and the bulk action) a cursor
// of each kind, well formed: its own continues, every other is a 400
// INVALID_REQUEST naming the cursor.
func TestCursorOfAnotherList(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.post(t, `{"queue": "emails", "task_type": "a"}`).task(t).TaskID
	routes := []struct {
		method, path string
		kind         cursor.Kind
		parts        []string
	}{
		{http.MethodGet, "/api/v1/tasks", cursor.Tasks, []string{id}},
		{http.MethodGet, "/api/v1/dlq", cursor.DLQ, []string{"1700000000000", "emails", id}},
		{http.MethodGet, "/api/v1/audit", cursor.Audit, []string{"1700000000000", "0"}},
		{http.MethodGet, "/api/v1/workers", cursor.Workers, []string{"w1"}},
		{http.MethodGet, "/api/v1/queues", cursor.Queues, []string{"a"}},
		{http.MethodGet, "/api/v1/schedules", cursor.Schedules, []string{"a"}},
		{http.MethodPost, "/api/v1/dlq/requeue?queue=emails", cursor.DLQBulk, []string{"0", "0"}},
	}
	for _, route := range routes {
		for _, other := range routes {
			sep := "?"
			if strings.Contains(route.path, "?") {
				sep = "&"
			}
			path := route.path + sep + "cursor=" + cursor.Encode(other.kind, other.parts...)
			res := b.do(t, route.method, path, "")
			if other.kind == route.kind {
				require.Equal(t, http.StatusOK, res.status, "%s %s: %s", route.method, path, res.body)
				continue
			}
			e := res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "cursor")
			require.Contains(t, e.Message, "not a cursor this list returned", "%s %s", route.method, path)
		}
	}
}
