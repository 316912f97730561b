package dtq_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workertest"
)

// claimAsDeadWorker starts up to n queued tasks of queue under a worker
// that will never renew nor finalize them (its lease is 1 s).
func (b *bundle) claimAsDeadWorker(t *testing.T, queue string, n int) []rdb.ClaimedTask {
	t.Helper()
	r := rdb.New(b.rc, b.prefix)
	require.NoError(t, r.EnsureGroups(b.ctx, queue))
	cl, err := r.Claim(b.ctx, queue, &rdb.WorkerSettings{WorkerID: "dead", Lease: time.Second, EventsMaxLen: 100}, n,
		time.Now(), "n1")
	require.NoError(t, err)
	return cl.Tasks
}

// TestReclaimOfACancelRequestedTaskEndsItCancelled: a running task gets a
// cancel request, then its worker stops (its lease runs out). The reclaim
// ends it cancelled, whatever its attempts left and whether the reclaiming
// worker has a free slot: a cancel request is never retried.
func TestReclaimOfACancelRequestedTaskEndsItCancelled(t *testing.T) {
	t.Parallel()
	for _, maxAttempts := range []int{3, 1} { // attempts left, or the last one
		t.Run("max_attempts "+strconv.Itoa(maxAttempts), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			adm := b.admin(t)
			require.NoError(t, adm.SetLimits(b.ctx, "default", dtqtype.QueueLimits{KeyConcurrency: 1}))
			first, err := b.client.Submit(b.ctx, dtq.Submission{Type: "job", MaxAttempts: maxAttempts, ConcurrencyKey: "acme"})
			require.NoError(t, err)
			require.Len(t, b.claimAsDeadWorker(t, "default", 1), 1)
			next, err := b.client.Submit(b.ctx, dtq.Submission{Type: "job", ConcurrencyKey: "acme"})
			require.NoError(t, err)
			cr, err := adm.CancelTask(b.ctx, first.TaskID, "stop it")
			require.NoError(t, err)
			require.True(t, cr.Requested)

			var runs atomic.Int32
			peer := b.workerOf(t, b.open(t, lateClock), func(c *dtq.WorkerConfig) { c.WorkerID = "peer" }) // past the dead worker's lease
			peer.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
				if task.ID == first.TaskID {
					runs.Add(1)
				}
				return "ran", nil
			})
			workertest.Run(t, peer)

			ti := b.waitStatus(t, first.TaskID, dtqtype.StatusCancelled)
			// Its key slot was given back: the next task of the key runs.
			b.waitStatus(t, next.TaskID, dtqtype.StatusSucceeded)
			require.Zero(t, runs.Load(), "a task with a cancel request ran again")
			require.Equal(t, 1, ti.Attempt)
			require.Len(t, ti.Attempts, 1)
			require.Equal(t, "cancelled", ti.Attempts[0].Outcome)
			require.Equal(t, "dead", ti.Attempts[0].WorkerID)
			require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_CANCEL_REQUESTED", "TASK_CANCELLED"},
				b.events(t, "default", first.TaskID))
			// The same bookkeeping as a finalize's cancel: no lease, no key
			// slot, depth and retained counts.
			require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Lease("default")).Val())
			require.Zero(t, b.rc.HLen(b.ctx, b.keys.KeyRunning("default")).Val())
			qi, err := b.insp.GetQueue(b.ctx, "default")
			require.NoError(t, err)
			require.Zero(t, qi.Depth)
			require.Equal(t, map[string]int64{"cancelled": 1, "succeeded": 1}, qi.Retained)
		})
	}
}

// TestWorkflowWhoseRunningNodeLostItsLeaseEndsCancelled: a workflow is
// cancelled while its node runs (the node gets a cancel request), then the
// node's worker stops. The reclaim ends the node cancelled, and with it the
// workflow; the node does not run again.
func TestWorkflowWhoseRunningNodeLostItsLeaseEndsCancelled(t *testing.T) {
	t.Parallel()
	b := setupWorkflowsOn(t, lateClock, nil) // past the dead worker's lease
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "x", Submission: dtq.Submission{Queue: "a", Type: "job", MaxAttempts: 3}}, job("y", "b", nil, "x")}})
	require.NoError(t, err)
	require.Len(t, b.claimAsDeadWorker(t, "a", 1), 1)
	_, ended, err := b.admin.CancelWorkflow(b.ctx, res.WorkflowID)
	require.NoError(t, err)
	require.False(t, ended, "its running node still has to end")

	workertest.Run(t, b.w)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowCancelled, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": dtqtype.StatusCancelled, "y": dtqtype.StatusCancelled}, nodeStatus(info))
	_, ran := b.deps.Load("x")
	require.False(t, ran, "the cancelled node ran again")
	ti, err := b.insp.GetTask(b.ctx, res.Nodes[0].TaskID)
	require.NoError(t, err)
	require.Equal(t, 1, ti.Attempt)
}
