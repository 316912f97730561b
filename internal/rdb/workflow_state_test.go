package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestReadWorkflowDecodesRecordAndGraph: the typed reads give a
// workflow's record and nodes as the scripts left them, the notes of what
// was done outside its slot and the on_failure definition included, and
// ErrWorkflowNotFound for a workflow that does not exist.
func TestReadWorkflowDecodesRecordAndGraph(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	a, c := b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "c", false, "a")
	of := b.wfNode(t, "q", "on_failure", false)
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Name: "nightly", Nodes: []WorkflowNode{a, c}, OnFailure: &of})
	b.release(t, id, st.Releases)

	s, err := r.ReadWorkflowState(ctx, id)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowRunning, s.Status)
	require.Equal(t, "nightly", s.Name)
	require.Equal(t, b.now.UnixMilli(), s.CreatedAt)
	require.Zero(t, s.FinishedAt)
	require.False(t, s.StartedEmitted || s.EndedEmitted || s.Listed || s.CancelRequested)
	got, err := s.OnFailure()
	require.NoError(t, err)
	require.Equal(t, of.Ref, got.Ref)
	require.Equal(t, of.Task.ID, got.Task.ID)

	g, err := r.ReadWorkflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, *s, g.WorkflowState)
	require.ElementsMatch(t, []GraphNode{
		{Ref: "a", TaskID: a.Task.ID, Queue: "q", Status: NodeReleased},
		{Ref: "c", TaskID: c.Task.ID, Queue: "q", Deps: []string{"a"}, Status: dtqtype.StatusWaiting},
	}, g.Nodes)

	// a fails: c is cancelled by its dep, and the workflow fails.
	res, err := r.WorkflowApply(ctx, &OutboxEntry{Workflow: id, Ref: "a", Status: dtqtype.StatusFailed, ErrorClass: "Boom"},
		b.now.Add(time.Second), time.Hour, false)
	require.NoError(t, err)
	b.release(t, id, res.Releases)
	require.NoError(t, r.WorkflowNote(ctx, id, NoteStarted, "1"))
	require.NoError(t, r.WorkflowNote(ctx, id, NoteListed, "1"))
	require.NoError(t, r.WorkflowNote(ctx, id, NoteOnFailure, "t-of"))
	g, err = r.ReadWorkflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowFailed, g.Status)
	require.Equal(t, b.now.Add(time.Second).UnixMilli(), g.FinishedAt)
	require.True(t, g.StartedEmitted)
	require.True(t, g.Listed)
	require.False(t, g.EndedEmitted)
	require.Equal(t, "t-of", g.OnFailureTaskID)
	byRef := map[string]GraphNode{}
	for _, n := range g.Nodes {
		byRef[n.Ref] = n
	}
	require.Equal(t, GraphNode{Ref: "a", TaskID: a.Task.ID, Queue: "q", Status: dtqtype.StatusFailed, ErrorClass: "Boom"}, byRef["a"])
	require.Equal(t, dtqtype.StatusCancelled, byRef["c"].Status)
	require.Equal(t, "DependencyFailed", byRef["c"].ErrorClass)

	// A cancel asked of a running workflow.
	id2 := NewWorkflowID(b.now, RandomWorkflowTag())
	b.submitWorkflow(t, &NewWorkflow{ID: id2, Nodes: []WorkflowNode{b.wfNode(t, "q", "x", false)}})
	_, _, _, _, err = r.WorkflowCancel(ctx, id2, b.now, 0)
	require.NoError(t, err)
	s, err = r.ReadWorkflowState(ctx, id2)
	require.NoError(t, err)
	require.True(t, s.CancelRequested)

	_, err = r.ReadWorkflowState(ctx, NewWorkflowID(b.now, RandomWorkflowTag()))
	require.ErrorIs(t, err, ErrWorkflowNotFound)
	_, err = r.ReadWorkflow(ctx, NewWorkflowID(b.now, RandomWorkflowTag()))
	require.ErrorIs(t, err, ErrWorkflowNotFound)
}
