package dtq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestWorkflowRelaysOfManyQueuesHoldFewConnections: the workflow
// maintenance the API runs, over 1,000 registered queues, holds one
// connection of its own per 256 queues (blocked in one read that names
// their outboxes) and holds none of the pool that serves requests, which
// stays as small as the requests need; a node's end on the last queue
// still reaches its workflow, and the relay connections go when it stops.
// (Before, each queue's relay blocked in a read on the request pool: 1,000
// queues kept the whole pool blocked, and every request waited for a
// connection.)
func TestWorkflowRelaysOfManyQueuesHoldFewConnections(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start() // a server of its own: its client count is this test's
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	const pool = 20
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: pool, PipelinePoolSize: -1})
	t.Cleanup(func() { _ = rc.Close() })
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = probe.Close() })

	d := openPrefix(t, rc, "p")
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	insp := d.Inspector()
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: client})
	require.NoError(t, err)
	queues := make([]string, 1000)
	for i := range queues {
		queues[i] = fmt.Sprintf("q%04d", i)
		_, err := admin.CreateQueue(ctx, queues[i], nil)
		require.NoError(t, err)
	}
	last := queues[len(queues)-1]
	res, err := client.SubmitWorkflow(ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "x", Submission: dtq.Submission{Queue: last, Type: "job"}},
		{Ref: "y", Deps: []string{"x"}, Submission: dtq.Submission{Queue: last, Type: "job"}}}})
	require.NoError(t, err)

	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(mctx, d, &dtq.WorkflowMaintenanceConfig{Client: client}) }()
	stopped := false
	defer func() {
		if !stopped {
			stop()
			require.NoError(t, <-done)
		}
	}()

	const groups = 4 // 1,000 queues in groups of 256
	var most int
	sample := func() (connected, blocked int) {
		connected, blocked = redistest.ClientCounts(t, probe)
		most = max(most, connected)
		return connected, blocked
	}
	require.Eventually(t, func() bool { _, blocked := sample(); return blocked == groups },
		30*time.Second, 10*time.Millisecond, "one blocking read per group of queues")

	// A node's end on the last queue (finished by hand, as an HTTP
	// worker's would be) releases its dependant.
	r := rdb.New(rc, "p")
	require.NoError(t, r.EnsureGroups(ctx, last))
	s := &rdb.WorkerSettings{WorkerID: "http-1", Lease: time.Minute, EventsMaxLen: 100, SucceededRetention: time.Hour}
	for range 2 {
		var ct rdb.ClaimedTask
		require.Eventually(t, func() bool {
			sample()
			cl, err := r.Claim(ctx, last, s, 1, time.Now(), "")
			require.NoError(t, err)
			if len(cl.Tasks) == 1 {
				ct = cl.Tasks[0]
			}
			return len(cl.Tasks) == 1
		}, 20*time.Second, 10*time.Millisecond)
		_, err := r.FinishSucceeded(ctx, last, s, time.Now(), []rdb.Success{{ID: ct.ID, Attempt: ct.Attempt}})
		require.NoError(t, err)
	}
	info, err := insp.WaitWorkflow(ctx, res.WorkflowID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)

	// The request pool is never tied up: its connections are what the test's
	// own sequential calls and the relays' short passes use.
	pst := rc.PoolStats()
	t.Logf("request pool: %d connections (%d idle), %d waits for a free one; at most %d server connections, %d blocked",
		pst.TotalConns, pst.IdleConns, pst.Timeouts, most, groups)
	require.Less(t, int(pst.TotalConns), pool, "the request pool is not filled by relays")
	require.Zero(t, pst.Timeouts, "no call waited out the pool")
	require.LessOrEqual(t, most, 1+pool+groups, "the probe, the request pool and one connection per group")

	stop()
	require.NoError(t, <-done)
	stopped = true
	require.Eventually(t, func() bool { _, blocked := redistest.ClientCounts(t, probe); return blocked == 0 },
		20*time.Second, 10*time.Millisecond, "the relays' reads end with the maintenance")
}
