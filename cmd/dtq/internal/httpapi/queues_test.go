package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

type queueListJSON struct {
	Items      []dtqtype.QueueInfo  `json:"items"`
	NextCursor *string              `json:"next_cursor"`
	Totals     *dtqtype.QueueTotals `json:"totals"`
}

func TestQueuesRead(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.do(t, http.MethodGet, "/api/v1/queues", "")
	require.Equal(t, http.StatusOK, res.status)
	var first map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(res.body, &first))
	require.JSONEq(t, `[]`, string(first["items"]))
	require.JSONEq(t, `null`, string(first["next_cursor"]))
	require.JSONEq(t, `{"queues":0,"depth":0,"running":0,"scheduled":0,"waiting":0,"dlq":0,"paused":0,"retained":0}`, string(first["totals"]))
	var mem dtqtype.RedisMemory
	require.NoError(t, json.Unmarshal(first["redis_memory"], &mem), "the first page shows Redis's memory")
	require.Positive(t, mem.UsedBytes)

	for p := range 3 {
		b.submit(t, dtq.Submission{Type: "echo", Queue: "ops", Priority: new(7 + p)})
	}
	b.submit(t, dtq.Submission{Type: "echo", Queue: "ops", Delay: time.Hour})
	b.submit(t, dtq.Submission{Type: "echo", Queue: "other"})

	var l queueListJSON
	b.do(t, http.MethodGet, "/api/v1/queues", "").decode(t, &l)
	require.Nil(t, l.NextCursor)
	require.Len(t, l.Items, 2)
	require.Equal(t, "ops", l.Items[0].Name)
	require.Equal(t, "other", l.Items[1].Name)

	res = b.do(t, http.MethodGet, "/api/v1/queues/ops", "")
	require.Equal(t, http.StatusOK, res.status)
	var qi dtqtype.QueueInfo
	res.decode(t, &qi)
	require.EqualValues(t, 4, qi.Depth)
	require.EqualValues(t, 3, qi.ReadyTotal)
	require.EqualValues(t, 1, qi.Ready["p9"])
	require.EqualValues(t, 1, qi.Scheduled)
	require.False(t, qi.Paused)
	var raw map[string]json.RawMessage
	res.decode(t, &raw)
	require.ElementsMatch(t, []string{"queue", "depth", "ready", "ready_total", "running", "pending", "scheduled", "waiting",
		"paused", "dlq", "live_workers", "unserved", "throughput", "retained"}, keysOf(raw))

	for _, q := range []string{"never-used", "Not_Valid", "%20"} {
		b.do(t, http.MethodGet, "/api/v1/queues/"+q, "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	}
	b.do(t, http.MethodGet, "/api/v1/queues?state=x", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "state")
}

// TestQueuesPage pages through the queue list: every queue once, in name
// order, totals on the first page only, and bad limits and cursors refused.
func TestQueuesPage(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var want []string
	for i := range 7 {
		q := fmt.Sprintf("page-%02d", i)
		want = append(want, q)
		_, err := b.admin.CreateQueue(b.ctx, q, nil)
		require.NoError(t, err)
		for range i % 3 {
			b.submit(t, dtq.Submission{Type: "echo", Queue: q})
		}
	}
	_, err := b.admin.PauseQueue(b.ctx, "page-03", "test")
	require.NoError(t, err)

	var got []string
	cursor, pages := "", 0
	for {
		var l queueListJSON
		path := "/api/v1/queues?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		res := b.do(t, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res.decode(t, &l)
		if pages == 0 {
			require.Equal(t, &dtqtype.QueueTotals{Queues: 7, Depth: 6, Paused: 1}, l.Totals)
		} else {
			require.Nil(t, l.Totals, "totals come on the first page only")
		}
		require.LessOrEqual(t, len(l.Items), 3)
		for _, qi := range l.Items {
			got = append(got, qi.Name)
		}
		pages++
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	require.Equal(t, want, got)
	require.Equal(t, 3, pages)

	var l queueListJSON
	b.do(t, http.MethodGet, "/api/v1/queues", "").decode(t, &l)
	require.Len(t, l.Items, 7, "the default page holds 100")

	for _, limit := range []string{"0", "1001", "ten"} {
		b.do(t, http.MethodGet, "/api/v1/queues?limit="+limit, "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "limit")
	}
	// Not base64; an empty name; a name that is not a queue name; too long.
	for _, c := range []string{"garbage!", "cTE6", "cTE6Tk9U", strings.Repeat("A", 5000)} {
		b.do(t, http.MethodGet, "/api/v1/queues?cursor="+c, "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "cursor")
	}
}

type pausedJSON struct {
	Queue   string `json:"queue"`
	Paused  bool   `json:"paused"`
	Changed bool   `json:"changed"`
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	admin := []string{"Authorization", "Bearer admin-secret"}
	b.submit(t, dtq.Submission{Type: "echo", Queue: "ops"})

	for _, tc := range []struct {
		action  string
		paused  bool
		changed bool
	}{
		{"pause", true, true},
		{"pause", true, false},
		{"resume", false, true},
		{"resume", false, false},
		{"pause", true, true},
	} {
		res := b.do(t, http.MethodPost, "/api/v1/queues/ops/"+tc.action, "", admin...)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var p pausedJSON
		res.decode(t, &p)
		require.Equal(t, pausedJSON{Queue: "ops", Paused: tc.paused, Changed: tc.changed}, p, tc.action)
		var qi dtqtype.QueueInfo
		b.do(t, http.MethodGet, "/api/v1/queues/ops", "", admin...).decode(t, &qi)
		require.Equal(t, tc.paused, qi.Paused)
	}

	// The events name the key that acted.
	msgs, err := b.rc.XRange(b.ctx, b.keys.Events("ops"), "-", "+").Result()
	require.NoError(t, err)
	var changes []string
	for _, m := range msgs {
		if typ := m.Values["type"].(string); typ == "QUEUE_PAUSED" || typ == "QUEUE_RESUMED" {
			changes = append(changes, typ)
			require.JSONEq(t, `{"actor":"ops"}`, m.Values["meta"].(string))
		}
	}
	require.Equal(t, []string{"QUEUE_PAUSED", "QUEUE_RESUMED", "QUEUE_PAUSED"}, changes)

	// Any valid name may be paused, even before its first task.
	res := b.do(t, http.MethodPost, "/api/v1/queues/not-yet-used/pause", "", admin...)
	require.Equal(t, http.StatusOK, res.status)
	for _, q := range []string{"Bad_Name", "-dash-first", "x%20y"} {
		b.do(t, http.MethodPost, "/api/v1/queues/"+q+"/pause", "", admin...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")
		b.do(t, http.MethodPost, "/api/v1/queues/"+q+"/resume", "", admin...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")
	}
	b.do(t, http.MethodPost, "/api/v1/queues/ops/pause", `{"for":"1h"}`, admin...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "for")
	b.do(t, http.MethodPost, "/api/v1/queues/ops/pause", "", "Authorization", "Bearer producer-secret").
		requireError(t, http.StatusForbidden, codeForbidden, "")
}

func TestPurgeQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var ids []string
	for range 3 {
		ids = append(ids, b.submit(t, dtq.Submission{Type: "echo", Queue: "ops"}))
	}
	later := b.submit(t, dtq.Submission{Type: "echo", Queue: "ops", Delay: time.Hour})

	res := b.do(t, http.MethodPost, "/api/v1/queues/ops/purge", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, `{"queue":"ops","cancelled":3}`, string(res.body))
	for _, id := range ids {
		tk := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "").task(t)
		require.Equal(t, "cancelled", tk.Status)
	}
	require.Equal(t, "pending", b.do(t, http.MethodGet, "/api/v1/tasks/"+later, "").task(t).Status)

	res = b.do(t, http.MethodPost, "/api/v1/queues/ops/purge", "")
	require.JSONEq(t, `{"queue":"ops","cancelled":0}`, string(res.body))
	b.do(t, http.MethodPost, "/api/v1/queues/never-used/purge", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	b.do(t, http.MethodPost, "/api/v1/queues/Bad_Name/purge", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")
}

func TestRecountQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.submit(t, dtq.Submission{Type: "echo", Queue: "ops"})
	b.submit(t, dtq.Submission{Type: "echo", Queue: "ops", Delay: time.Hour})
	require.NoError(t, b.rc.Set(b.ctx, b.keys.Depth("ops"), 42, 0).Err())

	res := b.do(t, http.MethodPost, "/api/v1/queues/ops/recount", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, `{"queue":"ops","old_depth":42,"depth":2}`, string(res.body))
	res = b.do(t, http.MethodPost, "/api/v1/queues/ops/recount", "{}")
	require.JSONEq(t, `{"queue":"ops","old_depth":2,"depth":2}`, string(res.body))

	b.do(t, http.MethodPost, "/api/v1/queues/never-used/recount", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")
	b.do(t, http.MethodPost, "/api/v1/queues/Bad_Name/recount", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")
}
