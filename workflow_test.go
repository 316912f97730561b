package dtq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// wfBundle is a client, an inspector, an admin and a worker serving queues
// "a" and "b", whose handler for type "job" does what the payload says:
// {"fail": true} fails for good, {"result": x} returns x.
type wfBundle struct {
	*bundle
	admin *dtq.Admin
	w     *dtq.Worker
	deps  sync.Map // ref -> map[string]dtq.DepResult
}

func setupWorkflows(t *testing.T, mod func(*dtq.WorkerConfig)) *wfBundle {
	t.Helper()
	return setupWorkflowsOn(t, nil, mod)
}

// setupWorkflowsOn is setupWorkflows with the worker on a Deployment whose
// settings dmod sets (see bundle.open).
func setupWorkflowsOn(t *testing.T, dmod func(*dtq.DeploymentConfig), mod func(*dtq.WorkerConfig)) *wfBundle {
	t.Helper()
	b := &wfBundle{bundle: setup(t, nil)}
	a, err := b.d.NewAdmin(&dtq.AdminConfig{Client: b.client})
	require.NoError(t, err)
	b.admin = a
	b.w = b.workerOf(t, b.open(t, dmod), func(c *dtq.WorkerConfig) {
		c.Queues = map[string]int{"a": 1, "b": 1}
		if mod != nil {
			mod(c)
		}
	})
	b.w.HandleFunc("job", b.job)
	return b
}

// job is the handler of type "job" (see wfBundle).
func (b *wfBundle) job(ctx context.Context, task *dtq.Task) (any, error) {
	b.deps.Store(task.Ref, task.Deps())
	var p struct {
		Fail   bool            `json:"fail"`
		Result json.RawMessage `json:"result"`
		Block  bool            `json:"block"`
	}
	_ = json.Unmarshal(task.Payload, &p)
	if p.Block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if p.Fail {
		return nil, dtq.Permanent(errors.New("asked to fail"))
	}
	return p.Result, nil
}

// peer is another worker of queues "a" and "b" with the same handler.
func (b *wfBundle) peer(t *testing.T) *dtq.Worker {
	t.Helper()
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"a": 1, "b": 1} })
	w.HandleFunc("job", b.job)
	return w
}

func job(ref, queue string, payload map[string]any, deps ...string) dtq.Node {
	if payload == nil {
		payload = map[string]any{}
	}
	return dtq.Node{Ref: ref, Deps: deps, Submission: dtq.Submission{Queue: queue, Type: "job", Payload: payload, MaxAttempts: 1}}
}

func (b *wfBundle) wait(t *testing.T, id string) *dtqtype.WorkflowInfo {
	t.Helper()
	info, err := b.insp.WaitWorkflow(b.ctx, id, 30*time.Second)
	require.NoError(t, err)
	require.True(t, info.Status.Terminal(), "workflow %s is still %s: %+v", id, info.Status, info.Nodes)
	return info
}

func nodeStatus(info *dtqtype.WorkflowInfo) map[string]dtqtype.Status {
	out := map[string]dtqtype.Status{}
	for _, n := range info.Nodes {
		out[n.Ref] = n.Status
	}
	return out
}

// sysEvents are the types of the _sys events about workflow id.
func (b *wfBundle) sysEvents(t *testing.T, id string) []string {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, b.keys.SysEvents(), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Values["workflow_id"] == id {
			out = append(out, m.Values["type"].(string))
		}
	}
	return out
}

// waitSysEvents waits until workflow id's _sys events are want: they
// are emitted from Go after the script that ended the workflow answered,
// so a reader that saw the end may be a moment early.
func (b *wfBundle) waitSysEvents(t *testing.T, id string, want ...string) {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		got = b.sysEvents(t, id)
		return slices.Equal(got, want)
	}, 30*time.Second, 20*time.Millisecond, "events of workflow %s: got %v, want %v", id, &got, want)
}

func TestWorkflowSemantics(t *testing.T) {
	t.Parallel()
	fail := map[string]any{"fail": true}
	cases := []struct {
		name   string
		nodes  []dtq.Node
		want   dtqtype.WorkflowStatus
		nodes2 map[string]dtqtype.Status
	}{
		{"chain", []dtq.Node{job("x", "a", nil), job("y", "b", nil, "x"), job("z", "a", nil, "y")},
			dtqtype.WorkflowSucceeded, map[string]dtqtype.Status{"x": "succeeded", "y": "succeeded", "z": "succeeded"}},
		{"diamond", []dtq.Node{job("top", "a", nil), job("l", "a", nil, "top"), job("r", "b", nil, "top"), job("j", "b", nil, "l", "r")},
			dtqtype.WorkflowSucceeded, map[string]dtqtype.Status{"top": "succeeded", "l": "succeeded", "r": "succeeded", "j": "succeeded"}},
		{"fail cancels the dependants", []dtq.Node{job("x", "a", fail), job("y", "b", nil, "x"), job("z", "a", nil, "y")},
			dtqtype.WorkflowFailed, map[string]dtqtype.Status{"x": "dead_lettered", "y": "cancelled", "z": "cancelled"}},
		{"continue runs after a failed dep", []dtq.Node{job("x", "a", fail),
			{Ref: "y", Deps: []string{"x"}, OnDepFailure: dtq.DepContinue, Submission: dtq.Submission{Queue: "b", Type: "job"}}},
			dtqtype.WorkflowSucceeded, map[string]dtqtype.Status{"x": "dead_lettered", "y": "succeeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupWorkflows(t, nil)
			workertest.Run(t, b.w)
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Name: tc.name, Nodes: tc.nodes})
			require.NoError(t, err)
			require.Equal(t, dtqtype.WorkflowRunning, res.Status)
			info := b.wait(t, res.WorkflowID)
			require.Equal(t, tc.want, info.Status)
			require.Equal(t, tc.nodes2, nodeStatus(info))
			for _, n := range info.Nodes {
				ti, err := b.insp.GetTask(b.ctx, n.TaskID)
				require.NoError(t, err)
				require.Equal(t, n.Status, ti.Status)
				require.Equal(t, res.WorkflowID, ti.WorkflowID)
				require.Equal(t, n.Ref, ti.Ref)
				if n.Status == dtqtype.StatusCancelled {
					require.Equal(t, "DependencyFailed", ti.Execution.ErrorClass)
				}
			}
			ended := map[dtqtype.WorkflowStatus]string{dtqtype.WorkflowSucceeded: "WORKFLOW_SUCCEEDED", dtqtype.WorkflowFailed: "WORKFLOW_FAILED"}
			b.waitSysEvents(t, res.WorkflowID, "WORKFLOW_STARTED", ended[tc.want])
		})
	}
}

func TestWorkflowDepsReachHandlers(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		job("x", "a", map[string]any{"result": map[string]int{"n": 1}}), job("f", "b", map[string]any{"fail": true}),
		{Ref: "y", Deps: []string{"x", "f"}, OnDepFailure: dtq.DepContinue, Submission: dtq.Submission{Queue: "b", Type: "job"}}}})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status, "f's only dependant said continue")
	v, ok := b.deps.Load("y")
	require.True(t, ok)
	deps := v.(map[string]dtq.DepResult)
	require.Equal(t, dtqtype.StatusSucceeded, deps["x"].Status)
	require.JSONEq(t, `{"n":1}`, string(deps["x"].Result))
	require.Equal(t, dtqtype.StatusDeadLettered, deps["f"].Status)
	v, _ = b.deps.Load("x")
	require.Empty(t, v.(map[string]dtq.DepResult))
}

func TestWorkflowFanInOfAThousand(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, func(c *dtq.WorkerConfig) { c.Concurrency = 32 })
	workertest.Run(t, b.w)
	nodes := []dtq.Node{}
	var deps []string
	for i := range 1000 {
		ref := fmt.Sprintf("n%d", i)
		nodes = append(nodes, job(ref, []string{"a", "b"}[i%2], map[string]any{"result": i}))
		deps = append(deps, ref)
	}
	nodes = append(nodes, job("join", "a", nil, deps...))
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: nodes})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Equal(t, 1001, info.Counts[dtqtype.StatusSucceeded])
	v, _ := b.deps.Load("join")
	require.Len(t, v.(map[string]dtq.DepResult), 1000)
}

func TestWorkflowOnFailureSubmittedOnce(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	var alerts atomic.Int32
	var payload atomic.Value
	b.w.HandleFunc("alert", func(ctx context.Context, task *dtq.Task) (any, error) {
		alerts.Add(1)
		payload.Store(string(task.Payload))
		return nil, nil
	})
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Name: "order-1",
		Nodes:     []dtq.Node{job("x", "a", map[string]any{"fail": true}), job("y", "b", nil, "x"), job("ok", "a", nil)},
		OnFailure: &dtq.Submission{Queue: "b", Type: "alert", Payload: map[string]any{"to": "ops"}}})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Eventually(t, func() bool {
		i, err := b.insp.GetWorkflow(b.ctx, res.WorkflowID)
		return err == nil && i.OnFailureTaskID != ""
	}, 20*time.Second, 10*time.Millisecond)
	info, err = b.insp.GetWorkflow(b.ctx, res.WorkflowID)
	require.NoError(t, err)
	b.waitStatus(t, info.OnFailureTaskID, dtqtype.StatusSucceeded)
	require.Equal(t, int32(1), alerts.Load())
	require.JSONEq(t, fmt.Sprintf(`{"to":"ops","workflow":{"id":%q,"name":"order-1","failed":["x","y"]}}`, res.WorkflowID),
		payload.Load().(string))
	ti, err := b.insp.GetTask(b.ctx, info.OnFailureTaskID)
	require.NoError(t, err)
	require.Equal(t, "workflow:"+res.WorkflowID+":on_failure", *ti.IdempotencyKey)
}

func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		job("run", "a", map[string]any{"block": true}), job("after", "b", nil, "run"),
		{Ref: "later", Deps: []string{"run"}, OnDepFailure: dtq.DepContinue, Submission: dtq.Submission{Queue: "a", Type: "job"}}}})
	require.NoError(t, err)
	b.waitStatus(t, res.Nodes[0].TaskID, dtqtype.StatusRunning)
	_, ended, err := b.admin.CancelWorkflow(b.ctx, res.WorkflowID)
	require.NoError(t, err)
	require.False(t, ended)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowCancelled, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"run": "cancelled", "after": "cancelled", "later": "cancelled"}, nodeStatus(info))
	_, ended, err = b.admin.CancelWorkflow(b.ctx, res.WorkflowID)
	require.NoError(t, err)
	require.True(t, ended)
	b.waitSysEvents(t, res.WorkflowID, "WORKFLOW_STARTED", "WORKFLOW_CANCELLED")
	_, _, err = b.admin.CancelWorkflow(b.ctx, "00000000000000000000000000000000")
	require.ErrorIs(t, err, dtq.ErrWorkflowNotFound)
}

func TestWorkflowNodeCancelFailsTheWorkflow(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		job("run", "a", map[string]any{"block": true}), job("wait", "b", nil, "run"),
		{Ref: "cont", Deps: []string{"run"}, OnDepFailure: dtq.DepContinue, Submission: dtq.Submission{Queue: "a", Type: "job"}}}})
	require.NoError(t, err)
	b.waitStatus(t, res.Nodes[0].TaskID, dtqtype.StatusRunning)
	_, err = b.admin.CancelTask(b.ctx, res.Nodes[0].TaskID, "")
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"run": "cancelled", "wait": "cancelled", "cont": "succeeded"}, nodeStatus(info))
}

func TestWorkflowWaitingNodeCancelled(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil) // not running: nothing runs
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "a", nil), job("y", "b", nil, "x")}})
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusWaiting, res.Nodes[1].Status)
	_, err = b.admin.CancelTask(b.ctx, res.Nodes[1].TaskID, "")
	require.NoError(t, err)
	workertest.Run(t, b.w)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": "succeeded", "y": "cancelled"}, nodeStatus(info))
	require.Equal(t, "0", b.rc.Get(b.ctx, b.keys.Depth("b")).Val())
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Waiting("b")).Val())
}

func TestWorkflowNodeExpires(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "x", Submission: dtq.Submission{Queue: "a", Type: "job", TTL: time.Second}}, job("y", "b", nil, "x")}})
	require.NoError(t, err)
	_, err = b.admin.PauseQueue(b.ctx, "a", "test") // x is never claimed; the expiry sweep ends it
	require.NoError(t, err)
	workertest.Run(t, b.w)
	b.waitStatus(t, res.Nodes[0].TaskID, dtqtype.StatusExpired)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": "expired", "y": "cancelled"}, nodeStatus(info))
}

func TestWorkflowDLQRequeueOfANode(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "a", map[string]any{"fail": true}), job("y", "b", nil, "x")}})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	// A requeue runs the node again as an ordinary task; the workflow,
	// which counted its dead-letter as the node's end, does not change.
	_, err = b.admin.RequeueDLQ(b.ctx, res.Nodes[0].TaskID, dtq.RequeueOptions{})
	require.NoError(t, err)
	b.waitStatus(t, res.Nodes[0].TaskID, dtqtype.StatusDeadLettered)
	require.Eventually(t, func() bool { return b.rc.XLen(b.ctx, b.keys.WorkflowOutbox("a")).Val() == 0 }, 20*time.Second, 10*time.Millisecond)
	again, err := b.insp.GetWorkflow(b.ctx, res.WorkflowID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowFailed, again.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": "dead_lettered", "y": "cancelled"}, nodeStatus(again))
}

func TestWorkflowAddNodes(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	var runs atomic.Int32
	var mismatch atomic.Value
	b.w.HandleFunc("fanout", func(ctx context.Context, task *dtq.Task) (any, error) {
		var kids []dtq.Node
		var refs []string
		for i := range 20 {
			ref := fmt.Sprintf("kid%d", i)
			kids = append(kids, job(ref, "b", map[string]any{"result": i}, task.Ref))
			refs = append(refs, ref)
		}
		kids = append(kids, job("sum", "a", nil, refs...))
		added, err := dtq.AddNodes(ctx, kids...)
		if err != nil {
			return nil, err
		}
		again, err := dtq.AddNodes(ctx, kids...) // a re-run adds the same nodes: no change
		if err != nil {
			return nil, err
		}
		for i := range added {
			if added[i].TaskID != again[i].TaskID {
				return nil, dtq.Permanent(errors.New("a second AddNodes gave other tasks"))
			}
		}
		_, err = dtq.AddNodes(ctx, job("sum", "a", map[string]any{"other": 1}, refs...))
		mismatch.Store(err)
		if runs.Add(1) == 1 {
			return nil, errors.New("fail once: the retry adds the nodes again")
		}
		return nil, nil
	})
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "root", Submission: dtq.Submission{Queue: "a", Type: "fanout", MaxAttempts: 3}}}})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Len(t, info.Nodes, 22)
	require.Equal(t, 22, info.Counts[dtqtype.StatusSucceeded])
	require.Equal(t, int32(2), runs.Load())
	require.ErrorIs(t, mismatch.Load().(error), dtq.ErrNodeMismatch)
	v, _ := b.deps.Load("sum")
	require.Len(t, v.(map[string]dtq.DepResult), 20)

	_, err = dtq.AddNodes(b.ctx, job("x", "a", nil))
	require.ErrorIs(t, err, dtq.ErrInvalidWorkflow, "outside a node's handler")
}

// TestWorkflowAddNodesChecksTheLeaseFirst: a fan-out under a lease that
// is not held is ErrLeaseLost, an empty one included (it adds nothing, but
// must not answer as if the node still ran).
func TestWorkflowAddNodesChecksTheLeaseFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("root", "a", nil)}})
	require.NoError(t, err)
	// Queued, never claimed: no attempt holds it.
	ended := dtq.NodeLease{Queue: "a", TaskID: res.Nodes[0].TaskID, Attempt: 1, WorkerID: "gone"}
	for _, nodes := range [][]dtq.Node{nil, {job("kid", "a", nil, "root")}} {
		_, err := b.client.AddNodes(b.ctx, ended, nodes...)
		require.ErrorIs(t, err, dtq.ErrLeaseLost, "%d nodes", len(nodes))
	}
}

func TestWorkflowIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	wf := dtq.Workflow{IdempotencyKey: "order-7", Nodes: []dtq.Node{job("x", "a", nil), job("y", "b", nil, "x")}}
	first, err := b.client.SubmitWorkflow(b.ctx, wf)
	require.NoError(t, err)
	_, err = b.client.SubmitWorkflow(b.ctx, wf)
	var ce *dtq.WorkflowConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress)
	require.Equal(t, first.WorkflowID, ce.WorkflowID)
	other := wf
	other.Nodes = []dtq.Node{job("x", "a", nil)}
	_, err = b.client.SubmitWorkflow(b.ctx, other)
	require.ErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch)

	workertest.Run(t, b.w)
	b.wait(t, first.WorkflowID)
	again, err := b.client.SubmitWorkflow(b.ctx, wf)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.WorkflowID, again.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, again.Status)
	_, err = b.client.SubmitWorkflow(b.ctx, other)
	require.ErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch)
}

func TestWorkflowValidation(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	cases := []struct {
		name string
		wf   dtq.Workflow
		node string
	}{
		{"no nodes", dtq.Workflow{}, "nodes"},
		{"cycle", dtq.Workflow{Nodes: []dtq.Node{job("x", "a", nil, "y"), job("y", "a", nil, "x")}}, "x"},
		{"unknown dep", dtq.Workflow{Nodes: []dtq.Node{job("x", "a", nil, "nope")}}, "x"},
		{"bad ref", dtq.Workflow{Nodes: []dtq.Node{job("X!", "a", nil)}}, "nodes[0]"},
		{"own key", dtq.Workflow{Nodes: []dtq.Node{{Ref: "x", Submission: dtq.Submission{Type: "job", IdempotencyKey: "k"}}}}, "x"},
		{"bad task", dtq.Workflow{Nodes: []dtq.Node{{Ref: "x", Submission: dtq.Submission{}}}}, "x"},
		{"long name", dtq.Workflow{Name: string(make([]byte, 129)), Nodes: []dtq.Node{job("x", "a", nil)}}, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.client.SubmitWorkflow(b.ctx, tc.wf)
			var we *dtq.WorkflowError
			require.ErrorAs(t, err, &we)
			require.ErrorIs(t, err, dtq.ErrInvalidWorkflow)
			require.Equal(t, tc.node, we.Node)
		})
	}
}

func TestWorkflowListing(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	var ids []string
	for i := range 5 {
		res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Name: fmt.Sprintf("w%d", i%2), Nodes: []dtq.Node{job("x", "a", nil)}})
		require.NoError(t, err)
		ids = append(ids, res.WorkflowID)
	}
	// Newest first by id: its creation millisecond, then its random tag
	// (workflows of one millisecond come in tag order).
	slices.Sort(ids)
	slices.Reverse(ids)
	page, err := b.insp.ListWorkflows(b.ctx, &dtq.WorkflowListParams{Limit: 3})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	require.Equal(t, ids[:3], []string{page.Items[0].ID, page.Items[1].ID, page.Items[2].ID})
	rest, err := b.insp.ListWorkflows(b.ctx, &dtq.WorkflowListParams{Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, rest.Items, 2)
	require.Equal(t, ids[3:], []string{rest.Items[0].ID, rest.Items[1].ID})
	require.Empty(t, rest.NextCursor)
	named, err := b.insp.ListWorkflows(b.ctx, &dtq.WorkflowListParams{Name: "w1", Status: dtqtype.WorkflowRunning})
	require.NoError(t, err)
	require.Len(t, named.Items, 2)
	_, err = b.insp.ListWorkflows(b.ctx, &dtq.WorkflowListParams{Cursor: "bogus"})
	require.ErrorIs(t, err, dtq.ErrInvalidCursor)
}

// TestWorkflowQueueDepthBound: a workflow whose nodes would take a queue
// past MaxQueueDepth is refused whole (*QueueFullError, nothing written),
// while a resubmission under a key still answers its workflow.
func TestWorkflowQueueDepthBound(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 4 })
	keyed := dtq.Workflow{IdempotencyKey: "k", Nodes: []dtq.Node{job("x", "a", nil), job("y", "a", nil, "x")}}
	first, err := b.client.SubmitWorkflow(b.ctx, keyed)
	require.NoError(t, err)
	_, err = b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "b", nil), job("y", "a", nil, "x")}})
	require.NoError(t, err, "3 of 4")

	_, err = b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "b", nil), job("y", "a", nil), job("z", "a", nil)}})
	var qf *dtq.QueueFullError
	require.ErrorAs(t, err, &qf)
	require.ErrorIs(t, err, dtq.ErrQueueFull)
	require.Equal(t, "a", qf.Queue)
	require.Equal(t, int64(3), qf.Depth)
	require.Equal(t, int64(4), qf.Limit)
	require.Positive(t, qf.RetryAfter)
	list, err := b.insp.ListWorkflows(b.ctx, nil)
	require.NoError(t, err)
	require.Len(t, list.Items, 2, "the refused workflow left nothing")
	require.Equal(t, "3", b.rc.Get(b.ctx, b.keys.Depth("a")).Val())
	require.Equal(t, "1", b.rc.Get(b.ctx, b.keys.Depth("b")).Val())

	// Queue a cannot take two more, but the key's own workflow is answered.
	_, err = b.client.SubmitWorkflow(b.ctx, keyed)
	var ce *dtq.WorkflowConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, first.WorkflowID, ce.WorkflowID)
}
