package dtq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// scaleNodes is the size of the workflows below: as many nodes as a
// workflow may have (MaxWorkflowNodes' default).
const scaleNodes = 10000

// victim submits a two-node workflow on queues "a" and "b", waits for it
// to succeed and returns how long that took.
func (b *wfBundle) victim(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "a", nil), job("y", "b", nil, "x")}})
	require.NoError(t, err)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status, "the victim: %+v", info.Nodes)
	return time.Since(start)
}

// waitEnded waits until task id has ended.
func (b *wfBundle) waitEnded(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ti, err := b.insp.GetTask(b.ctx, id)
		return err == nil && ti.Status.Terminal()
	}, 30*time.Second, 20*time.Millisecond, "task %s never ended", id)
}

// waitCounts waits until workflow id's node counts are want, and until its
// releases are all carried out and dropped.
func (b *wfBundle) waitCounts(t *testing.T, id string, want map[dtqtype.Status]int) *dtqtype.WorkflowInfo {
	t.Helper()
	var info *dtqtype.WorkflowInfo
	require.Eventually(t, func() bool {
		var err error
		info, err = b.insp.GetWorkflow(b.ctx, id)
		if err != nil || b.rc.HLen(b.ctx, b.keys.WorkflowReleases(id)).Val() > 0 {
			return false
		}
		for st, n := range want {
			if info.Counts[st] != n {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "workflow %s never reached counts %v with no release left", id, want)
	return info
}

// TestWorkflowTenThousandNodes: a workflow as big as the API accepts
// releases, cascades and fans out in full, and leaves the other workflows
// of its queues unaffected: a two-node workflow ending on the same queues
// right behind it finishes (its time is logged, not asserted). Releases
// of that size once failed in wf_released ("too many results to unpack")
// and the queue's relay retried that batch for good, every workflow behind
// it stuck waiting.
func TestWorkflowTenThousandNodes(t *testing.T) {
	t.Parallel()
	kids := func(queue string, deps ...string) []dtq.Node {
		out := make([]dtq.Node, 0, scaleNodes-1)
		for i := range scaleNodes - 1 {
			out = append(out, job(fmt.Sprintf("k%d", i), queue, nil, deps...))
		}
		return out
	}
	tests := []struct {
		name string
		// run submits the big workflow, waits until its node ending on
		// queue "a" has ended, and returns its id and the counts it reaches.
		run func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int)
	}{
		{"a root releases 9,999 dependants", func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int) {
			// The dependants are on queue "c", which no worker serves: they
			// stay queued once released.
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: append([]dtq.Node{job("root", "a", nil)}, kids("c", "root")...)})
			require.NoError(t, err)
			b.waitEnded(t, res.Nodes[0].TaskID)
			return res.WorkflowID, map[dtqtype.Status]int{dtqtype.StatusSucceeded: 1, dtqtype.StatusQueued: scaleNodes - 1}
		}},
		{"a failure cascades over 9,999 dependants", func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int) {
			// Their cancels end on queue "b", whose relay then applies 9,999
			// ends the workflow already knows.
			nodes := append([]dtq.Node{job("root", "a", map[string]any{"fail": true})}, kids("b", "root")...)
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: nodes})
			require.NoError(t, err)
			b.waitEnded(t, res.Nodes[0].TaskID)
			return res.WorkflowID, map[dtqtype.Status]int{dtqtype.StatusDeadLettered: 1, dtqtype.StatusCancelled: scaleNodes - 1}
		}},
		{"10,000 roots", func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int) {
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: append(kids("c"), job("root", "c", nil))})
			require.NoError(t, err)
			return res.WorkflowID, map[dtqtype.Status]int{dtqtype.StatusQueued: scaleNodes}
		}},
		{"a cancel of 10,000 nodes", func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int) {
			// The running root ends cancelled on queue "a"; the 9,999
			// waiting dependants end cancelled on queue "b", whose relay
			// then applies their ends.
			nodes := append([]dtq.Node{job("root", "a", map[string]any{"block": true})}, kids("b", "root")...)
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: nodes})
			require.NoError(t, err)
			b.waitStatus(t, res.Nodes[0].TaskID, dtqtype.StatusRunning)
			_, ended, err := b.admin.CancelWorkflow(b.ctx, res.WorkflowID)
			require.NoError(t, err)
			require.False(t, ended)
			b.waitEnded(t, res.Nodes[0].TaskID)
			return res.WorkflowID, map[dtqtype.Status]int{dtqtype.StatusCancelled: scaleNodes}
		}},
		{"a fan-out of 9,999 nodes", func(t *testing.T, b *wfBundle) (string, map[dtqtype.Status]int) {
			res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
				{Ref: "root", Submission: dtq.Submission{Queue: "a", Type: "fanout", MaxAttempts: 1}}}})
			require.NoError(t, err)
			b.waitEnded(t, res.Nodes[0].TaskID)
			return res.WorkflowID, map[dtqtype.Status]int{dtqtype.StatusSucceeded: 1, dtqtype.StatusQueued: scaleNodes - 1}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setupWorkflows(t, func(c *dtq.WorkerConfig) { c.Concurrency = 4 })
			b.w.HandleFunc("fanout", func(ctx context.Context, task *dtq.Task) (any, error) {
				_, err := dtq.AddNodes(ctx, kids("c", task.Ref)...)
				return nil, err
			})
			workertest.Run(t, b.w)
			start := time.Now()
			id, want := tt.run(t, b)
			t.Logf("%s: submitted and its node on queue a ended in %v", tt.name, time.Since(start))
			start = time.Now()
			took := b.victim(t)
			t.Logf("%s: the two-node workflow behind it took %v", tt.name, took)
			b.waitCounts(t, id, want)
			t.Logf("%s: the big workflow reached its counts %v after its node on queue a ended", tt.name, time.Since(start))
		})
	}
}

// TestWorkflowEndThatFailsHoldsBackNoOther: a node end whose apply fails
// (here its workflow's graph is not a hash for a while) is parked for the sweep, and the
// relay goes on with the ends behind it: a workflow ending on the same
// queue right after still finishes. The sweep retries the parked end with
// backoff, under one attention entry (not one more per try), and applies
// it once it can. The relay once retried the failing entry for good, and
// every workflow behind it stayed waiting.
func TestWorkflowEndThatFailsHoldsBackNoOther(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	gate := make(chan struct{})
	b.w.HandleFunc("gate", func(ctx context.Context, _ *dtq.Task) (any, error) {
		select {
		case <-gate:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	workertest.Run(t, b.w)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "root", Submission: dtq.Submission{Queue: "a", Type: "gate", MaxAttempts: 1}}, job("kid", "b", nil, "root")}})
	require.NoError(t, err)
	id := res.WorkflowID
	nodes := b.keys.WorkflowNodes(id)
	graph, err := b.rc.Dump(b.ctx, nodes).Result()
	require.NoError(t, err)
	require.NoError(t, b.rc.Set(b.ctx, nodes, "not a hash", 0).Err()) // wf_apply fails at its first read
	close(gate)
	b.waitEnded(t, res.Nodes[0].TaskID)

	took := b.victim(t)
	t.Logf("the two-node workflow behind the failing end took %v", took)

	// The sweep fails on it, and retries later under one entry.
	var tries string
	require.Eventually(t, func() bool {
		ms := b.attention(t, id)
		if len(ms) != 1 {
			return false
		}
		_, tries, _ = strings.Cut(ms[0], "~")
		return tries != ""
	}, 30*time.Second, 20*time.Millisecond, "the sweep never retried workflow %s", id)
	require.Len(t, b.attention(t, id), 1, "one attention entry, whatever the tries")
	require.EqualValues(t, 1, b.rc.HLen(b.ctx, b.keys.WorkflowParked(id)).Val(), "the end stays parked")

	require.NoError(t, b.rc.RestoreReplace(b.ctx, nodes, 0, graph).Err())
	info := b.wait(t, id)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Zero(t, b.rc.Exists(b.ctx, b.keys.WorkflowParked(id)).Val(), "the parked end was applied")
	require.Eventually(t, func() bool { return len(b.attention(t, id)) == 0 }, 30*time.Second, 20*time.Millisecond)
}

// attention are the attention index's members of workflow id.
func (b *wfBundle) attention(t *testing.T, id string) []string {
	t.Helper()
	ms, err := b.rc.ZRange(b.ctx, b.keys.WorkflowAttention(), 0, -1).Result()
	require.NoError(t, err)
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m, id) {
			out = append(out, m)
		}
	}
	return out
}

// TestWorkflowDepResultsPastTheBoundAreLeftOut: a join whose deps' results
// add up past DepResultsMaxBytes sees the first ones inline and each later
// one as its task id with ResultOmitted; the result is read from that
// task. Every result was once inlined, however many and however large.
func TestWorkflowDepResultsPastTheBoundAreLeftOut(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, func(c *dtq.WorkerConfig) { c.ResultMaxBytes = 2 * dtq.DepResultsMaxBytes })
	big := strings.Repeat("x", dtq.DepResultsMaxBytes/2) // three of them do not fit
	b.w.HandleFunc("big", func(_ context.Context, task *dtq.Task) (any, error) { return big + task.Ref, nil })
	workertest.Run(t, b.w)
	refs := []string{"d0", "d1", "d2"}
	var nodes []dtq.Node
	for _, ref := range refs {
		nodes = append(nodes, dtq.Node{Ref: ref, Submission: dtq.Submission{Queue: "a", Type: "big", MaxAttempts: 1}})
	}
	nodes = append(nodes, job("join", "b", nil, refs...))
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: nodes})
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowSucceeded, b.wait(t, res.WorkflowID).Status)
	v, _ := b.deps.Load("join")
	deps := v.(map[string]dtq.DepResult)
	require.Len(t, deps, 3)
	omitted := 0
	for i, ref := range refs {
		d := deps[ref]
		require.Equal(t, dtqtype.StatusSucceeded, d.Status, ref)
		if !d.ResultOmitted {
			require.Equal(t, `"`+big+ref+`"`, string(d.Result), ref)
			require.Empty(t, d.TaskID, ref)
			continue
		}
		omitted++
		require.Nil(t, d.Result, ref)
		require.Equal(t, res.Nodes[i].TaskID, d.TaskID, ref)
		ti, err := b.insp.GetTask(b.ctx, d.TaskID)
		require.NoError(t, err)
		require.Equal(t, `"`+big+ref+`"`, string(ti.Result), "the left-out result is on the dep's task")
	}
	require.Equal(t, 2, omitted, "the first result fits, the next two do not")
}
