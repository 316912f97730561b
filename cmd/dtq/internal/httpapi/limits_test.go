package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestFairnessLimitsOverHTTP: fairness, key_rate and key_order go through
// PUT and GET /queues/{q}/limits as set, bad values are 400 naming the
// field, setting them is audited, and GET /queues/{q} shows the top keys by
// backlog (every answer checked against openapi.json).
func TestFairnessLimitsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	body := `{"fairness":{"default_weight":1,"weights":{"acme":5}},"key_rate":{"limit":2,"period":"1s","burst":1},"key_order":"fifo"}`
	res := b.do(t, http.MethodPut, "/api/v1/queues/tenants/limits", body)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res = b.do(t, http.MethodGet, "/api/v1/queues/tenants/limits", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, `{"queue":"tenants","limits":`+body+`}`, string(res.body))

	for _, tc := range []struct{ body, field string }{
		{`{"fairness":{"weights":{"acme":0}}}`, "fairness.weights"},
		{`{"fairness":{"default_weight":5000}}`, "fairness.default_weight"},
		{`{"key_rate":{"limit":2,"period":"0s"}}`, "key_rate.period"},
		{`{"key_order":"lifo"}`, "key_order"},
	} {
		b.do(t, http.MethodPut, "/api/v1/queues/tenants/limits", tc.body).requireError(t, http.StatusBadRequest, codeInvalidTask, tc.field)
	}

	// 0 is no value of any limit: refused, never stored as "not set".
	for _, tc := range []struct{ body, field string }{
		{`{"concurrency":0,"key_order":"fifo"}`, "concurrency"},
		{`{"key_concurrency":0,"key_order":"fifo"}`, "key_concurrency"},
		{`{"rate":{"limit":1,"period":"1s","burst":0}}`, "rate.burst"},
		{`{"key_rate":{"limit":1,"period":"1s","burst":0}}`, "key_rate.burst"},
		{`{"fairness":{"default_weight":0}}`, "fairness.default_weight"},
	} {
		b.do(t, http.MethodPut, "/api/v1/queues/tenants/limits", tc.body).requireError(t, http.StatusBadRequest, codeInvalidTask, tc.field)
	}
	res = b.do(t, http.MethodGet, "/api/v1/queues/tenants/limits", "")
	require.JSONEq(t, `{"queue":"tenants","limits":`+body+`}`, string(res.body), "a refused PUT changes nothing")

	for _, k := range []string{"acme", "acme", "zed"} {
		b.submit(t, dtq.Submission{Queue: "tenants", Type: "echo", ConcurrencyKey: k})
	}
	res = b.do(t, http.MethodGet, "/api/v1/queues/tenants", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var qi struct {
		TopKeys []struct {
			Key    string `json:"key"`
			Queued int64  `json:"queued"`
		} `json:"top_keys"`
		ReadyTotal int64 `json:"ready_total"`
	}
	res.decode(t, &qi)
	require.EqualValues(t, 3, qi.ReadyTotal)
	require.Len(t, qi.TopKeys, 2)
	require.Equal(t, "acme", qi.TopKeys[0].Key)
	require.EqualValues(t, 2, qi.TopKeys[0].Queued)

	var details []string
	for _, a := range b.audit(t) {
		if a.Action == "queue.limits.set" {
			details = append(details, a.Detail)
		}
	}
	require.Equal(t, []string{"fairness=default:1,acme:5 key_rate=2/1s key_order=fifo"}, details)
}

// TestEventDetailOverHTTP: events goes through PUT and GET
// /queues/{q}/limits, alone or with limits, shows on GET /queues/{q}, is
// audited, and anything but "full" or "outcomes" is 400 naming the field;
// a task of the queue then writes no TASK_QUEUED, and ?wait= still answers
// it at its end.
func TestEventDetailOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, body := range []string{`{"events":"outcomes"}`, `{"concurrency":3,"events":"outcomes"}`} {
		res := b.do(t, http.MethodPut, "/api/v1/queues/quiet/limits", body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res = b.do(t, http.MethodGet, "/api/v1/queues/quiet/limits", "")
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.JSONEq(t, `{"queue":"quiet","limits":`+body+`}`, string(res.body))
	}
	for _, tc := range []struct{ body, code, field string }{
		{`{"events":"none"}`, codeInvalidTask, "events"},
		{`{"events":"FULL"}`, codeInvalidTask, "events"},
		{`{"events":5}`, codeInvalidRequest, "events"},
		{`{"events":""}`, codeInvalidTask, "rate"}, // nothing set: the message names what may be given
	} {
		b.do(t, http.MethodPut, "/api/v1/queues/quiet/limits", tc.body).requireError(t, http.StatusBadRequest, tc.code, tc.field)
	}

	id := b.submit(t, dtq.Submission{Queue: "quiet", Type: "echo"})
	res := b.do(t, http.MethodGet, "/api/v1/queues/quiet", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var qi struct {
		Limits struct {
			Events string `json:"events"`
		} `json:"limits"`
	}
	res.decode(t, &qi)
	require.Equal(t, "outcomes", qi.Limits.Events)
	require.Zero(t, b.rc.XLen(b.ctx, b.keys.Events("quiet")).Val(), "no TASK_QUEUED")
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task("quiet", id), "status", "succeeded").Err())
	res = b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=10s", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "succeeded", res.task(t).Status)

	var details []string
	for _, a := range b.audit(t) {
		if a.Action == "queue.limits.set" {
			details = append(details, a.Detail)
		}
	}
	require.Equal(t, []string{"concurrency=3 events=outcomes", "events=outcomes"}, details, "newest first")
}
