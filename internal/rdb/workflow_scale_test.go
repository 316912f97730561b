package rdb

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestWorkflowListsOfTenThousand: the calls that take one entry per
// released ref, acknowledged outbox entry or dropped workflow take 10,000
// at once, each script call within MaxCallArgs (the test clients fail a
// longer one) and no script unpacking the whole list.
func TestWorkflowListsOfTenThousand(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	const n = 10000
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("r%d", i)
	}
	fill := func(add func(pipe redis.Pipeliner, v string)) {
		pipe := b.c.Pipeline()
		for _, v := range vals {
			add(pipe, v)
		}
		_, err := pipe.Exec(b.ctx)
		require.NoError(t, err)
	}

	releases := b.keys.WorkflowReleases("w")
	fill(func(pipe redis.Pipeliner, v string) { pipe.HSet(b.ctx, releases, v, "x") })
	require.NoError(t, b.r.WorkflowReleased(b.ctx, "w", vals))
	require.Zero(t, b.c.HLen(b.ctx, releases).Val(), "wf_released")

	index := b.keys.WorkflowIndex()
	fill(func(pipe redis.Pipeliner, v string) { pipe.ZAdd(b.ctx, index, redis.Z{Member: v}) })
	require.NoError(t, b.r.DropFromWorkflowIndex(b.ctx, vals))
	require.Zero(t, b.c.ZCard(b.ctx, index).Val(), "wf_unlist")

	out := b.keys.WorkflowOutbox("q")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("1-%d", i+1)
	}
	pipe := b.c.Pipeline()
	for _, id := range ids {
		pipe.XAdd(b.ctx, &redis.XAddArgs{Stream: out, ID: id, Values: []any{"w", "x"}})
	}
	_, err := pipe.Exec(b.ctx)
	require.NoError(t, err)
	require.NoError(t, b.r.AckOutbox(b.ctx, "q", ids))
	require.Zero(t, b.c.XLen(b.ctx, out).Val(), "wf_ack")
}

// TestWorkflowLargeReleaseIsStored: a release of more nodes than a reply
// carries inline is answered as stored, read back in chunks by
// WorkflowScanReleases, and dropped in chunks; a resend of the end that
// decided it answers the same.
func TestWorkflowLargeReleaseIsStored(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	const kids = ReleaseChunk + ReleaseChunk/2
	nodes := []WorkflowNode{b.wfNode(t, "q", "root", false)}
	for i := range kids {
		n := b.wfNode(t, "q", fmt.Sprintf("k%d", i), false, "root")
		n.Task.ID = NewTaskID(1, b.now.Add(time.Duration(i+1)*time.Microsecond))
		nodes = append(nodes, n)
	}
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: nodes})
	require.False(t, st.Stored)
	b.release(t, id, st.Releases)

	en := &OutboxEntry{Workflow: id, Ref: "root", Status: dtqtype.StatusSucceeded, Result: `{"n":1}`}
	res := twice(t, b, "wf_apply", func() (ApplyResult, error) {
		res, err := r.WorkflowApply(ctx, en, b.now, time.Hour, false)
		res.Known = false
		return res, err
	})
	require.True(t, res.Stored, "too many to answer inline")
	require.Empty(t, res.Releases)

	seen := map[string]bool{}
	var cursor uint64
	for {
		rels, next, err := r.WorkflowScanReleases(ctx, id, cursor, ReleaseChunk)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rels), 2*ReleaseChunk, "a chunk is about ReleaseChunk")
		for _, rel := range rels {
			require.Equal(t, "run", rel.Kind)
			require.JSONEq(t, `{"root":{"status":"succeeded","result":{"n":1}}}`, rel.Detail)
			seen[rel.Ref] = true
		}
		b.release(t, id, rels)
		if cursor = next; cursor == 0 {
			break
		}
	}
	require.Len(t, seen, kids)
	require.Zero(t, b.c.HLen(ctx, b.keys.WorkflowReleases(id)).Val())
	require.EqualValues(t, kids+1, b.c.XLen(ctx, b.keys.Stream("q", 5)).Val(), "the root and every kid are queued once")
}

// TestWorkflowParkedEnd: an end parked for the sweep is kept once, read
// back, and leaves the parked hash when it is applied.
func TestWorkflowParkedEnd(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a")}})
	b.release(t, id, st.Releases)
	en := &OutboxEntry{Workflow: id, Ref: "a", Status: dtqtype.StatusSucceeded, Result: `{"x":"a|b"}`}
	gone := twice(t, b, "wf_park", func() (bool, error) { return r.WorkflowPark(ctx, en) })
	require.False(t, gone)
	later := *en
	later.Status = dtqtype.StatusFailed
	_, err := r.WorkflowPark(ctx, &later)
	require.NoError(t, err)
	es, next, err := r.WorkflowParked(ctx, id, 0, 100)
	require.NoError(t, err)
	require.Zero(t, next)
	require.Equal(t, []OutboxEntry{{Workflow: id, Ref: "a", Status: dtqtype.StatusSucceeded, Result: `{"x":"a|b"}`}}, es,
		"the first end parked stays")

	res, err := r.WorkflowApply(ctx, &es[0], b.now, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, []string{"run:b"}, refsOf(res.Releases))
	require.Zero(t, b.c.Exists(ctx, b.keys.WorkflowParked(id)).Val())

	gone, err = r.WorkflowPark(ctx, &OutboxEntry{Workflow: NewWorkflowID(b.now, RandomWorkflowTag()), Ref: "a"})
	require.NoError(t, err)
	require.True(t, gone)
}

// TestWorkflowDepResultsBounded: a join's deps outcomes inline results up
// to DepResultsMaxBytes in all; each later succeeded dep carries its task
// id and result_omitted instead, whatever the number of deps.
func TestWorkflowDepResultsBounded(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	const deps = 300
	big := `"` + strings.Repeat("x", 8190) + `"` // an 8 KB result
	var nodes []WorkflowNode
	var refs []string
	for i := range deps {
		n := b.wfNode(t, "q", fmt.Sprintf("d%03d", i), false)
		n.Task.ID = NewTaskID(1, b.now.Add(time.Duration(i+1)*time.Microsecond))
		nodes = append(nodes, n)
		refs = append(refs, n.Ref)
	}
	nodes = append(nodes, b.wfNode(t, "q", "join", true, append(refs, "failed")...), b.wfNode(t, "q", "failed", false))
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: nodes})
	require.True(t, st.Stored, "301 roots are more than a reply carries inline")
	var last ApplyResult
	for i := range deps {
		var err error
		last, err = r.WorkflowApply(ctx, &OutboxEntry{Workflow: id, Ref: refs[i], Status: dtqtype.StatusSucceeded, Result: big},
			b.now, time.Hour, false)
		require.NoError(t, err)
	}
	require.Empty(t, last.Releases)
	last, err := r.WorkflowApply(ctx, &OutboxEntry{Workflow: id, Ref: "failed", Status: dtqtype.StatusFailed, ErrorClass: "Boom"},
		b.now, time.Hour, false)
	require.NoError(t, err)
	require.Len(t, last.Releases, 1)
	detail := last.Releases[0].Detail
	require.Less(t, len(detail), DepResultsMaxBytes+deps*100, "bounded: %d bytes", len(detail))
	var got map[string]struct {
		Status        string          `json:"status"`
		Result        json.RawMessage `json:"result"`
		TaskID        string          `json:"task_id"`
		ResultOmitted bool            `json:"result_omitted"`
		ErrorClass    string          `json:"error_class"`
	}
	require.NoError(t, json.Unmarshal([]byte(detail), &got))
	require.Len(t, got, deps+1)
	inlined := DepResultsMaxBytes / (len(big) + len(`{"status":"succeeded","result":}`))
	for i, ref := range refs {
		o := got[ref]
		require.Equal(t, "succeeded", o.Status, ref)
		if i < inlined {
			require.JSONEq(t, big, string(o.Result), ref)
			require.False(t, o.ResultOmitted, ref)
			continue
		}
		require.Nil(t, o.Result, ref)
		require.True(t, o.ResultOmitted, ref)
		require.Equal(t, nodes[i].Task.ID, o.TaskID, ref)
	}
	require.Equal(t, "failed", got["failed"].Status)
	require.Equal(t, "Boom", got["failed"].ErrorClass, "an end without a result is always inlined")
}
