package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// t0 is the start of every test's clock.
var t0 = time.UnixMilli(1_750_000_000_000)

// node is a node of queue q that runs task type "job".
func node(t *testing.T, r *rdb.RDB, q, ref string, deps ...string) rdb.WorkflowNode {
	t.Helper()
	num, err := r.QueueNumber(context.Background(), q)
	require.NoError(t, err)
	return rdb.WorkflowNode{Ref: ref, Queue: q, Deps: deps, Digest: "d-" + ref,
		Task: rdb.NodeTask{ID: rdb.NewTaskID(num, t0), Type: "job", Payload: []byte(`{"n":1}`), Priority: 5,
			MaxAttempts: 1, TimeoutMS: 30000, CreatedAt: t0.UnixMilli()}}
}

// TestSweepSubmitsAFailedWorkflowsOnFailureThroughItsHost: the engine
// needs of the library around it only the function that submits an
// on_failure task. A workflow whose node failed, left to the sweep, gets
// its on_failure task submitted through that function once, with the
// failed refs in its payload under the workflow's own idempotency key, and
// the task's id and the end event noted on the workflow.
func TestSweepSubmitsAFailedWorkflowsOnFailureThroughItsHost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	r := rdb.New(s.Client, s.Prefix)
	var now atomic.Int64
	now.Store(t0.UnixMilli())
	var (
		mu     sync.Mutex
		calls  []rdb.NewTask
		queues []string
	)
	e := engine.New(r, &engine.Config{Clock: func() time.Time { return time.UnixMilli(now.Load()) }, EventsMaxLen: 100,
		FailedRetention: time.Hour, Retention: time.Hour, RecentCap: 100, IdempotencyTTL: time.Hour,
		SubmitOnFailure: func(_ context.Context, _, queue string, _ time.Time, task *rdb.NewTask) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			calls, queues = append(calls, *task), append(queues, queue)
			return "of-task", nil
		}})

	of := node(t, r, "alerts", "on_failure")
	nw := &rdb.NewWorkflow{ID: rdb.NewWorkflowID(t0, rdb.RandomWorkflowTag()), Name: "nightly",
		Nodes: []rdb.WorkflowNode{node(t, r, "q", "a"), node(t, r, "q", "b", "a")}, OnFailure: &of}
	sub, err := e.Submit(ctx, nw, t0)
	require.NoError(t, err)
	require.Equal(t, rdb.WorkflowCreated, sub.Create.Outcome)
	require.NotNil(t, sub.Start, "every step landed")

	// a fails as the relay would record it, cut short before the effects.
	id := nw.ID
	require.NoError(t, r.WorkflowMark(ctx, rdb.NewAttention(id, t0.UnixMilli()), false))
	res, err := r.WorkflowApply(ctx, &rdb.OutboxEntry{Workflow: id, Ref: "a", Status: dtqtype.StatusFailed}, t0, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowFailed, res.Final)

	now.Store(t0.Add(time.Minute).UnixMilli()) // the mark is due
	sweepCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.RunSweep(sweepCtx) }()
	require.Eventually(t, func() bool {
		st, err := r.ReadWorkflowState(ctx, id)
		return err == nil && st.OnFailureTaskID == "of-task" && st.EndedEmitted
	}, 10*time.Second, 5*time.Millisecond)
	stop()
	<-done

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 1)
	require.Equal(t, []string{"alerts"}, queues)
	require.Equal(t, "workflow:"+id+":on_failure", calls[0].IdempotencyKey)
	var payload struct {
		N        int `json:"n"`
		Workflow struct {
			ID     string   `json:"id"`
			Name   string   `json:"name"`
			Failed []string `json:"failed"`
		} `json:"workflow"`
	}
	require.NoError(t, json.Unmarshal(calls[0].Payload, &payload))
	require.Equal(t, 1, payload.N)
	require.Equal(t, id, payload.Workflow.ID)
	require.Equal(t, "nightly", payload.Workflow.Name)
	require.Equal(t, []string{"a", "b"}, payload.Workflow.Failed, "b was cancelled by its dep")

	info, err := engine.Info(ctx, r, id)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, "of-task", info.OnFailureTaskID)
	require.Equal(t, map[dtqtype.Status]int{dtqtype.StatusFailed: 1, dtqtype.StatusCancelled: 1}, info.Counts)
}

// TestUnknownWorkflows: reads and cancels of a workflow that does not
// exist, or whose id is not one, give ErrNotFound.
func TestUnknownWorkflows(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	r := rdb.New(s.Client, s.Prefix)
	e := engine.New(r, &engine.Config{Clock: time.Now, EventsMaxLen: 100})
	for _, id := range []string{"nope", rdb.NewWorkflowID(t0, rdb.RandomWorkflowTag())} {
		_, err := engine.Info(ctx, r, id)
		require.ErrorIs(t, err, engine.ErrNotFound, id)
	}
	_, err := e.Cancel(ctx, rdb.NewWorkflowID(t0, rdb.RandomWorkflowTag()))
	require.ErrorIs(t, err, engine.ErrNotFound)
}
