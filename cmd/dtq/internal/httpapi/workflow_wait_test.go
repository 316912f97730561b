package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestWorkflowWaitersShareOneStatusPoll: many GET /api/v1/workflows/{id}?wait=
// on one running workflow read only its status, through one poller, and
// its graph once, when it ends; every waiter gets the ended workflow.
func TestWorkflowWaitersShareOneStatusPoll(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	counted, n := s.Counted(t)
	b := setup(t, options{redis: counted})
	// Maintenance and the cancel go through a client the count leaves out.
	d := openDeployment(t, s.Client, s.Prefix)
	plain, err := d.NewClient(nil)
	require.NoError(t, err)
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: plain})
	require.NoError(t, err)
	mctx, stop := context.WithCancel(b.ctx)
	maint := make(chan error, 1)
	go func() { maint <- dtq.RunWorkflowMaintenance(mctx, d, &dtq.WorkflowMaintenanceConfig{Client: plain}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-maint) })

	res, err := plain.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "a", Submission: dtq.Submission{Queue: "unserved", Type: "t"}},
		{Ref: "b", Deps: []string{"a"}, Submission: dtq.Submission{Queue: "unserved", Type: "t"}}}})
	require.NoError(t, err)
	id := res.WorkflowID
	keys := rdb.NewKeys(s.Prefix)
	record, graph := keys.Workflow(id), keys.WorkflowNodes(id)

	const waiters = 8
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	answers := make(chan wfJSON, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/api/v1/workflows/"+id+"?wait=60s", nil)
			if !assertNoError(t, err) {
				return
			}
			res, err := b.srv.Client().Do(req)
			if !assertNoError(t, err) {
				return
			}
			defer func() { _ = res.Body.Close() }()
			body, err := io.ReadAll(res.Body)
			if !assertNoError(t, err) || res.StatusCode != http.StatusOK {
				t.Errorf("wait answered %d: %s", res.StatusCode, body)
				return
			}
			var w wfJSON
			if assertNoError(t, json.Unmarshal(body, &w)) {
				answers <- w
			}
		})
	}
	require.Eventually(t, func() bool {
		b.api.waits.mu.Lock()
		defer b.api.waits.mu.Unlock()
		return b.api.waits.inFlight == waiters
	}, 30*time.Second, time.Millisecond)
	reads := func() int { return n.Count("hmget", record) + n.Count("hgetall", record) }
	before := reads()
	require.Eventually(t, func() bool { return reads() >= before+3 }, 30*time.Second, time.Millisecond, "the waits poll")
	require.Zero(t, n.Count("hgetall", graph), "no graph read while the workflow runs")
	b.api.wfWatches.mu.Lock()
	require.Len(t, b.api.wfWatches.byID, 1, "one poller for the workflow")
	require.Equal(t, waiters, b.api.wfWatches.byID[id].waiters)
	b.api.wfWatches.mu.Unlock()

	_, _, err = admin.CancelWorkflow(b.ctx, id)
	require.NoError(t, err)
	wg.Wait()
	close(answers)
	got := 0
	for w := range answers {
		require.Equal(t, "cancelled", w.Status)
		require.Len(t, w.Nodes, 2)
		got++
	}
	require.Equal(t, waiters, got)
	require.Equal(t, 1, n.Count("hgetall", graph), "the graph is read once, for every waiter")
}

// assertNoError reports err as the test's error (from any goroutine) and
// whether there was none.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
