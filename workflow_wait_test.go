package dtq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestWaitWorkflowReadsStatusOnly: waiting on a workflow reads only its
// status until it ends, and its graph once then, so that a waiter on a
// large workflow costs no more than on a small one.
func TestWaitWorkflowReadsStatusOnly(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	counted, n := s.Counted(t)
	ctx := context.Background()
	d := openPrefix(t, s.Client, s.Prefix)
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: client})
	require.NoError(t, err)
	insp := openPrefix(t, counted.Client, s.Prefix).Inspector()
	mctx, stop := context.WithCancel(ctx)
	maint := make(chan error, 1)
	go func() { maint <- dtq.RunWorkflowMaintenance(mctx, d, &dtq.WorkflowMaintenanceConfig{Client: client}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-maint) })
	res, err := client.SubmitWorkflow(ctx, dtq.Workflow{Nodes: []dtq.Node{job("a", "unserved", nil), job("b", "unserved", nil, "a")}})
	require.NoError(t, err)
	keys := rdb.NewKeys(s.Prefix)
	record, graph := keys.Workflow(res.WorkflowID), keys.WorkflowNodes(res.WorkflowID)

	type answer struct {
		info *dtqtype.WorkflowInfo
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		info, err := insp.WaitWorkflow(ctx, res.WorkflowID, time.Minute)
		done <- answer{info, err}
	}()
	reads := func() int { return n.Count("hmget", record) + n.Count("hgetall", record) }
	require.Eventually(t, func() bool { return reads() >= 5 }, 30*time.Second, time.Millisecond, "the waiter polls")
	require.Zero(t, n.Count("hgetall", graph), "no graph read while the workflow runs")

	_, _, err = admin.CancelWorkflow(ctx, res.WorkflowID)
	require.NoError(t, err)
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, dtqtype.WorkflowCancelled, got.info.Status)
	require.Len(t, got.info.Nodes, 2)
	require.Equal(t, 1, n.Count("hgetall", graph), "the graph is read once, at the end")

	// A wait on an ended workflow, or an unknown one, answers at once.
	info, err := insp.WaitWorkflow(ctx, res.WorkflowID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowCancelled, info.Status)
	_, err = insp.WaitWorkflow(ctx, "0123456789abcdef0123456789abcdef", time.Minute)
	require.ErrorIs(t, err, dtq.ErrWorkflowNotFound)
	_, err = insp.WaitWorkflow(ctx, "nope", time.Minute)
	require.ErrorIs(t, err, dtq.ErrWorkflowNotFound)

	// A caller that leaves gets its context's error.
	other, err := client.SubmitWorkflow(ctx, dtq.Workflow{Nodes: []dtq.Node{job("a", "unserved", nil)}})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = insp.WaitWorkflow(cctx, other.WorkflowID, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
}
