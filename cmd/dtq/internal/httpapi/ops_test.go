package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestOpsRedisDown(t *testing.T) {
	t.Parallel()
	b := downServer(t)
	for _, rq := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/tasks/" + missingID + "/cancel", ""},
		{http.MethodPost, "/api/v1/tasks/" + missingID + "/run-now", ""},
		{http.MethodDelete, "/api/v1/tasks/" + missingID, ""},
		{http.MethodGet, "/api/v1/queues", ""},
		{http.MethodGet, "/api/v1/queues/q", ""},
		{http.MethodPost, "/api/v1/queues/q/pause", ""},
		{http.MethodPost, "/api/v1/queues/q/resume", ""},
		{http.MethodPost, "/api/v1/queues/q/purge", ""},
		{http.MethodPost, "/api/v1/queues/q/recount", ""},
		{http.MethodGet, "/api/v1/dlq", ""},
		{http.MethodGet, "/api/v1/dlq/" + missingID, ""},
		{http.MethodPost, "/api/v1/dlq/" + missingID + "/requeue", ""},
		{http.MethodPost, "/api/v1/dlq/" + missingID + "/discard", ""},
		{http.MethodPost, "/api/v1/dlq/requeue", `{"queue":"q"}`},
		{http.MethodPost, "/api/v1/dlq/purge", ""},
		{http.MethodGet, "/api/v1/workers", ""},
		{http.MethodGet, "/api/v1/workers/w1", ""},
		{http.MethodGet, "/api/v1/stats", ""},
		{http.MethodGet, "/api/v1/audit", ""},
	} {
		res := b.do(t, rq.method, rq.path, rq.body)
		require.Equal(t, http.StatusServiceUnavailable, res.status, "%s %s: %s", rq.method, rq.path, res.body)
		res.requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
	}
}

// Odd path values and bodies on the operator routes are client errors or
// not-found answers, never a 5xx.
func TestOpsOddInputs(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.submit(t, dtq.Submission{Type: "echo", Queue: "q"})
	odd := []string{"x", "%00", "%ff%fe", "..", strings.Repeat("a", 2000), "0190a5c4e2c07000800000000000fffZ",
		"ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ", "%7B%7D", "a%2Fb", "-", "_"}
	bodies := []string{"", "{}", `{"reason":"r"}`, `{"queue":"q"}`, `{"cursor":"` + strings.Repeat("A", 100) + `"}`, "[1]", `{"x":{"y":[`}
	for _, v := range odd {
		for _, p := range []struct{ method, path string }{
			{http.MethodPost, "/api/v1/tasks/" + v + "/cancel"},
			{http.MethodPost, "/api/v1/tasks/" + v + "/run-now"},
			{http.MethodDelete, "/api/v1/tasks/" + v},
			{http.MethodGet, "/api/v1/queues/" + v},
			{http.MethodPost, "/api/v1/queues/" + v + "/pause"},
			{http.MethodPost, "/api/v1/queues/" + v + "/purge"},
			{http.MethodPost, "/api/v1/queues/" + v + "/recount"},
			{http.MethodGet, "/api/v1/dlq/" + v},
			{http.MethodPost, "/api/v1/dlq/" + v + "/requeue"},
			{http.MethodPost, "/api/v1/dlq/" + v + "/discard"},
			{http.MethodGet, "/api/v1/workers/" + v},
			{http.MethodGet, "/api/v1/dlq?cursor=" + v},
			{http.MethodGet, "/api/v1/audit?cursor=" + v},
			{http.MethodGet, "/api/v1/stats?window=" + v},
			{http.MethodPost, "/api/v1/dlq/purge?cursor=" + v + "&queue=q"},
		} {
			for _, body := range bodies {
				res := b.do(t, p.method, p.path, body)
				require.Less(t, res.status, 500, "%s %s %q: %s", p.method, p.path, body, res.body)
				if res.status >= 400 {
					res.errBody(t)
				}
			}
		}
	}
}

// A browser on another origin cannot make a visitor's browser change state,
// even in open mode; reads and non-browser clients are unaffected.
func TestCrossOriginWritesRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "q"})
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "https://evil.example"},
	} {
		for _, rq := range []struct{ method, path string }{
			{http.MethodPost, "/api/v1/queues/q/pause"},
			{http.MethodPost, "/api/v1/tasks/" + id + "/cancel"},
			{http.MethodDelete, "/api/v1/tasks/" + id},
			{http.MethodPost, "/api/v1/dlq/purge"},
		} {
			b.do(t, rq.method, rq.path, "", hdr...).requireError(t, http.StatusForbidden, codeForbidden, "")
		}
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/queues/q", "", hdr...).status)
	}
	require.Equal(t, "queued", b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "").task(t).Status)

	// Same origin (the dashboard) and clients without browser headers pass.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/q/pause", "", "Sec-Fetch-Site", "same-origin").status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/q/resume", "").status)
}
