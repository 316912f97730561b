package rdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestMemoryPerWorkflowNode measures, on a private server, what a retained
// workflow node costs once its workflow has succeeded: in the workflow's
// slot (record, graph and outcomes) and in total (its task hash and result
// included), for a 2,000-node workflow of chains joined in groups.
func TestMemoryPerWorkflowNode(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory with a 2,000-node workflow")
	}
	t.Parallel()
	r, c, used := privateRDB(t)
	ctx := context.Background()
	const n = 2000
	b := &testRDB{ctx: ctx, r: r, c: c, keys: r.Keys(), now: time.Now()}
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	payload := []byte(`{"data":"` + strings.Repeat("x", 88) + `"}`) // 100 bytes
	nodes := make([]WorkflowNode, n)
	for i := range nodes {
		var deps []string
		if i%10 != 0 {
			deps = []string{fmt.Sprintf("n%d", i-1)}
		}
		nodes[i] = b.wfNode(t, "q", fmt.Sprintf("n%d", i), false, deps...)
		nodes[i].Task.Payload = payload
	}
	base := used()
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Name: "memory", Nodes: nodes})
	b.release(t, id, st.Releases)
	if st.Stored {
		b.releaseStored(t, id)
	}
	waiting := float64(used()-base) / n
	s := &WorkerSettings{WorkerID: "host-1234-abcdef", Lease: time.Hour, EventsMaxLen: 100000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}
	var final dtqtype.WorkflowStatus
	for round := 0; final == ""; round++ {
		cl, err := r.Claim(ctx, "q", s, 500, b.now, fmt.Sprintf("c%d", round))
		require.NoError(t, err)
		require.NotEmpty(t, cl.Tasks, "the workflow stalled")
		succ := make([]Success, len(cl.Tasks))
		for i, ct := range cl.Tasks {
			succ[i] = Success{ID: ct.ID, Attempt: ct.Attempt, Result: []byte(`{"ok":true}`)}
		}
		_, err = r.FinishSucceeded(ctx, "q", s, b.now, succ)
		require.NoError(t, err)
		for c.XLen(ctx, r.Keys().WorkflowOutbox("q")).Val() > 0 {
			if f := b.relay(t, "q"); len(f) > 0 {
				final = f[0]
			}
		}
	}
	require.Equal(t, dtqtype.WorkflowSucceeded, final)
	events := c.MemoryUsage(ctx, r.Keys().Events("q"), 0).Val()
	recent := c.MemoryUsage(ctx, r.Keys().Recent("q"), 0).Val()
	total := float64(used()-base-events-recent) / n
	slot := float64(c.MemoryUsage(ctx, r.Keys().Workflow(id), 0).Val()+c.MemoryUsage(ctx, r.Keys().WorkflowNodes(id), 0).Val()) / n
	t.Logf("bytes per workflow node (100-byte payload, the capped event stream and recent index apart):")
	t.Logf("  written and waiting %.0f; retained once succeeded %.0f, of which the workflow slot %.0f", waiting, total, slot)
	require.Less(t, total, 2500.0, "a loose bound: the figures are for the docs")
}
