package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// TestNewWorkerIDsPastTheBoundAre429: an API key past
// DTQ_MAX_WORKERS_PER_KEY, and any key past DTQ_MAX_WORKERS, registers no
// new worker id (429 TOO_MANY_WORKERS with Retry-After, no record written);
// workers already recorded keep claiming and renewing.
func TestNewWorkerIDsPastTheBoundAre429(t *testing.T) {
	t.Parallel()
	keys := []APIKey{
		{Role: RoleWorker, Name: "py", Secret: "py-secret"},
		{Role: RoleWorker, Name: "go", Secret: "go-secret"},
	}
	b := setup(t, options{keys: keys, deployment: func(c *dtq.DeploymentConfig) { c.MaxWorkers = 3 }, maxWorkersPerKey: 2})
	py, gk := []string{"X-API-Key", "py-secret"}, []string{"X-API-Key", "go-secret"}
	claim := func(worker string, hdr []string) *response {
		return b.do(t, http.MethodPost, "/api/v1/claims", fmt.Sprintf(`{"worker_id": %q, "queues": ["r"]}`, worker), hdr...)
	}
	for _, w := range []string{"py-0", "py-1"} {
		require.Equal(t, http.StatusOK, claim(w, py).status)
	}
	for range 2 { // sent again: the same answer
		res := claim("py-2", py)
		e := res.requireError(t, http.StatusTooManyRequests, codeTooManyWorkers, "")
		require.Equal(t, "key", e.Details["scope"])
		require.EqualValues(t, 2, e.Details["limit"])
		require.Contains(t, e.Message, "DTQ_MAX_WORKERS_PER_KEY")
		ra, err := strconv.Atoi(res.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, ra)
	}
	require.Zero(t, b.rc.Exists(b.ctx, b.keys.Worker("py-2")).Val(), "no record for a refused id")
	require.Equal(t, http.StatusOK, claim("py-0", py).status, "a recorded worker keeps claiming")

	require.Equal(t, http.StatusOK, claim("go-0", gk).status)
	e := claim("go-1", gk).requireError(t, http.StatusTooManyRequests, codeTooManyWorkers, "")
	require.Equal(t, "total", e.Details["scope"])

	// A recorded worker's renewal goes through at the bound.
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "r"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["r"]}`, py...)
	require.Len(t, tasks, 1)
	require.Equal(t, id, tasks[0].TaskID)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tasks[0].LeaseToken, ""), py...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
}

// TestWorkersListIsPaged: GET /api/v1/workers answers at most limit
// workers and a cursor to the next page; following the cursors lists every
// worker once; a made-up cursor or limit is a 400.
func TestWorkersListIsPaged(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var want []string
	for i := range 5 {
		w := fmt.Sprintf("w-%d", i)
		want = append(want, w)
		b.claimTasks(t, fmt.Sprintf(`{"worker_id": %q, "queues": ["r"]}`, w))
	}
	var got []string
	path := "/api/v1/workers?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		var l struct {
			Items      []dtqtype.WorkerInfo `json:"items"`
			NextCursor *string              `json:"next_cursor"`
		}
		b.do(t, http.MethodGet, path, "").decode(t, &l)
		require.LessOrEqual(t, len(l.Items), 2)
		for _, w := range l.Items {
			got = append(got, w.ID)
		}
		if l.NextCursor == nil {
			break
		}
		path = "/api/v1/workers?limit=2&cursor=" + url.QueryEscape(*l.NextCursor)
	}
	require.Equal(t, want, got)

	b.do(t, http.MethodGet, "/api/v1/workers?cursor=%25%25", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "cursor")
	b.do(t, http.MethodGet, "/api/v1/workers?limit=1001", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "limit")
	b.do(t, http.MethodGet, "/api/v1/workers?limit=0", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "limit")
}
