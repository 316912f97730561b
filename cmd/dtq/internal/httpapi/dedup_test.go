package httpapi

import (
	"context"
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

// TestDedupAnswers: a collapsed submission answers 200 with the
// Dtq-Deduplicated header and its key's task; replace answers 202 with the
// task it cancelled; the task shows its dedup_key; the queue and /metrics
// count them (docs/deduplication.md).
func TestDedupAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.post(t, `{"task_type":"reindex","queue":"docs","payload":{"doc":1},"dedup":{"key":"doc-1","mode":"drop"}}`)
	require.Equal(t, http.StatusAccepted, first.status, string(first.body))
	require.Empty(t, first.header.Get(DedupHeader))
	var fj map[string]any
	first.decode(t, &fj)
	require.Equal(t, "doc-1", fj["dedup_key"])
	require.NotContains(t, fj, "deduplicated")

	second := b.post(t, `{"task_type":"reindex","queue":"docs","payload":{"doc":2},"dedup":{"key":"doc-1","mode":"drop"}}`)
	require.Equal(t, http.StatusOK, second.status, string(second.body))
	require.Equal(t, "drop", second.header.Get(DedupHeader))
	require.Empty(t, second.header.Get("Idempotent-Replayed"))
	var sj map[string]any
	second.decode(t, &sj)
	require.Equal(t, fj["task_id"], sj["task_id"], "the winner's id")
	require.Equal(t, "drop", sj["deduplicated"])
	require.Equal(t, "/api/v1/tasks/"+fj["task_id"].(string), second.header.Get("Location"))

	r1 := b.post(t, `{"task_type":"render","queue":"docs","dedup":{"by":["task_type","payload.page"],"mode":"replace"},"payload":{"page":3}}`)
	require.Equal(t, http.StatusAccepted, r1.status, string(r1.body))
	r2 := b.post(t, `{"task_type":"render","queue":"docs","dedup":{"by":["task_type","payload.page"],"mode":"replace"},"payload":{"page":3,"v":2}}`)
	require.Equal(t, http.StatusAccepted, r2.status, string(r2.body))
	var r2j map[string]any
	r2.decode(t, &r2j)
	require.Equal(t, r1.task(t).TaskID, r2j["replaced_task_id"])
	require.Equal(t, `by:task_type="render"&payload.page=3`, r2j["dedup_key"])
	got := b.do(t, http.MethodGet, "/api/v1/tasks/"+r1.task(t).TaskID, "")
	require.Equal(t, "cancelled", got.task(t).Status)

	q := b.do(t, http.MethodGet, "/api/v1/queues/docs", "")
	require.Equal(t, http.StatusOK, q.status, string(q.body))
	var qj struct {
		Deduplicated map[string]int `json:"deduplicated"`
	}
	q.decode(t, &qj)
	require.Equal(t, map[string]int{"drop": 1, "replace": 1}, qj.Deduplicated)
	page := string(b.do(t, http.MethodGet, "/metrics", "").body)
	require.Contains(t, page, `dtq_tasks_deduplicated_total{mode="drop",queue="docs"} 1`)
	require.Contains(t, page, `dtq_tasks_deduplicated_total{mode="replace",queue="docs"} 1`)
	require.Contains(t, page, `dtq_tasks_submitted_total{queue="docs"} 3`, "a collapsed submission created nothing")
}

// TestDedupBatch: each batch item is deduplicated on its own, in order.
func TestDedupBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[
		{"task_type":"t","dedup":{"key":"k","mode":"throttle","ttl":"1h"}},
		{"task_type":"t","dedup":{"key":"k","mode":"throttle","ttl":"1h"}},
		{"task_type":"t","dedup":{"key":"k","mode":"nope"}}]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var out struct {
		Items []struct {
			HTTPStatus   int    `json:"http_status"`
			Deduplicated string `json:"deduplicated"`
			Task         *struct {
				TaskID string `json:"task_id"`
			} `json:"task"`
			Error *struct {
				Code    string         `json:"code"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		} `json:"items"`
	}
	res.decode(t, &out)
	require.Len(t, out.Items, 3)
	require.Equal(t, http.StatusAccepted, out.Items[0].HTTPStatus)
	require.Equal(t, http.StatusOK, out.Items[1].HTTPStatus)
	require.Equal(t, "throttle", out.Items[1].Deduplicated)
	require.Equal(t, out.Items[0].Task.TaskID, out.Items[1].Task.TaskID)
	require.Equal(t, http.StatusBadRequest, out.Items[2].HTTPStatus)
	require.Equal(t, "dedup.mode", out.Items[2].Error.Details["field"])
}

// TestDedupRefusedFields: what a client can get wrong in dedup is a 400
// naming the field, and writes nothing.
func TestDedupRefusedFields(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	long := strings.Repeat("x", 257)
	tests := []struct{ dedup, field string }{
		{`"drop"`, "dedup"},
		{`{}`, "dedup.mode"},
		{`{"key":"k","mode":"sometimes"}`, "dedup.mode"},
		{`{"key":"","mode":"drop"}`, "dedup.key"},
		{`{"key":"` + long + `","mode":"drop"}`, "dedup.key"},
		{`{"key":7,"mode":"drop"}`, "dedup.key"},
		{`{"key":"by:task_type=\"t\"","mode":"drop"}`, "dedup.key"},
		{`{"mode":"drop"}`, "dedup"},
		{`{"by":[],"mode":"drop"}`, "dedup.by"},
		{`{"by":"task_type","mode":"drop"}`, "dedup.by"},
		{`{"by":["payload"],"mode":"drop"}`, "dedup.by"},
		{`{"key":"k","mode":"throttle"}`, "dedup.ttl"},
		{`{"key":"k","mode":"throttle","ttl":"soon"}`, "dedup.ttl"},
		{`{"key":"k","mode":"throttle","ttl":60}`, "dedup.ttl"},
		{`{"key":"k","mode":"debounce"}`, "dedup.window"},
		{`{"key":"k","mode":"debounce","window":"1s","max_wait":"10ms"}`, "dedup.max_wait"},
		{`{"key":"k","mode":"drop","ttl":"-1s"}`, "dedup.ttl"},
		{`{"key":"k","mode":"drop","extra":1}`, "dedup.extra"},
	}
	for _, tc := range tests {
		res := b.post(t, `{"task_type":"t","dedup":`+tc.dedup+`}`)
		res.requireError(t, http.StatusBadRequest, "INVALID_TASK", tc.field)
	}
	require.Zero(t, b.keyCount(t), "nothing written")
	wf := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","task_type":"t","dedup":{"key":"k","mode":"drop"}}]}`)
	require.Equal(t, http.StatusBadRequest, wf.status, string(wf.body))
	var e map[string]any
	require.NoError(t, json.Unmarshal(wf.body, &e))
	require.Contains(t, e["message"], "dedup")
}

// TestDedupDebounceStartsByMaxWait: one submission every 300 ms for 5 s
// of a debounce key (window 1s, max_wait 3s) over HTTP, with a real worker.
// The first task is never due past its first submission + max_wait and
// never takes a payload sent after it was due: a submission sent after
// that moment is a new task, whether or not the promoter has queued the
// first yet. How long after the first submission the first task started is
// logged, not asserted (it includes the promoter's and the worker's
// latency, which a loaded machine stretches).
func TestDedupDebounceStartsByMaxWait(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	type run struct {
		at time.Time
		id string
		n  int
	}
	started := make(chan run, 32)
	b.startWorker(t, map[string]int{"deb": 1}, handlers{"reindex": func(ctx context.Context, task *dtq.Task) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			return nil, err
		}
		started <- run{time.Now(), task.ID, p.N}
		return nil, nil
	}})
	const body = `{"task_type":"reindex","queue":"deb","payload":{"n":%d},` +
		`"dedup":{"key":"d","mode":"debounce","window":"1s","max_wait":"3s"}}`
	const maxWait = 3 * time.Second
	type sent struct {
		at time.Time // before the request: the server's time is later
		id string
	}
	var subs []sent
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i == 0 || time.Since(subs[0].at) < 5*time.Second; i++ {
		at := time.Now()
		res := b.post(t, fmt.Sprintf(body, i))
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, res.status, string(res.body))
		subs = append(subs, sent{at, res.task(t).TaskID})
		<-tick.C
	}
	var first run
	select {
	case first = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no task started")
	}
	t.Logf("first start %v after the first submission (max_wait %v)", first.at.Sub(subs[0].at), maxWait)
	require.Equal(t, subs[0].id, first.id, "the first submission's task starts first")
	ti := b.waitStatus(t, first.id, dtqtype.StatusSucceeded)
	require.LessOrEqual(t, ti.AvailableAt.Sub(ti.CreatedAt.Time), maxWait, "due by the first submission + max_wait")
	require.False(t, subs[first.n].at.After(ti.AvailableAt.Time), "the task ran with payload %d, sent %v after it was due",
		first.n, subs[first.n].at.Sub(ti.AvailableAt.Time))
	for i, s := range subs {
		if s.at.After(ti.AvailableAt.Time) {
			require.NotEqual(t, first.id, s.id, "submission %d, sent %v after the first task was due, collapsed into it",
				i, s.at.Sub(ti.AvailableAt.Time))
		}
	}
}
