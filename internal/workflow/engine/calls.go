package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/rdb"
)

// resendWindow bounds how long a wf_create whose reply did not come is
// sent again (it is safe to send twice).
const resendWindow = 3 * time.Second

// Submitted is what Submit did with a workflow: wf_create's answer and,
// for a workflow it created whose later steps landed, wf_start's (nil
// when they are left to the sweep: the workflow is still submitting).
type Submitted struct {
	Create rdb.CreateResult
	Start  *rdb.StartResult
}

// UnansweredError is a submission whose record's write got no answer:
// whether the workflow exists is unknown.
type UnansweredError struct{ Err error }

// Error says the outcome is unknown.
func (e *UnansweredError) Error() string { return "dtq: submit workflow: no answer: " + e.Err.Error() }

// Unwrap returns the last error of the write.
func (e *UnansweredError) Unwrap() error { return e.Err }

// Submit runs the steps of a validated submission: a mark in the
// attention index, the record's write (wf_create, sent again until Redis
// answers or the resend window passes: *UnansweredError), and for a
// workflow it created, its nodes' writes and activation. Once the record
// is written, a step that does not land is the sweep's to complete; its
// error is logged, not returned.
func (e *Engine) Submit(ctx context.Context, nw *rdb.NewWorkflow, now time.Time) (Submitted, error) {
	mark := rdb.NewAttention(nw.ID, now.UnixMilli())
	if err := e.rdb.WorkflowMark(ctx, mark, true); err != nil {
		return Submitted{}, fmt.Errorf("dtq: submit workflow: %w", err)
	}
	cr, err := e.rdb.WorkflowCreate(ctx, now, nw)
	if err != nil {
		if cr, err = attempt.Resend(ctx, resendWindow, func() (rdb.CreateResult, error) {
			return e.rdb.WorkflowCreate(ctx, now, nw)
		}); err != nil {
			return Submitted{}, &UnansweredError{Err: err}
		}
	}
	if cr.Outcome != rdb.WorkflowCreated {
		_ = e.rdb.WorkflowUnmark(ctx, mark)
		return Submitted{Create: cr}, nil
	}
	// From here on the workflow exists: what does not land now, the sweep
	// completes from the stored definitions.
	st, err := e.activate(ctx, nw.ID, nw.Nodes, now)
	if err != nil {
		e.log.Warn("workflow submit left to maintenance", "workflow_id", nw.ID, "err", err)
		return Submitted{Create: cr}, nil
	}
	_ = e.rdb.WorkflowUnmark(ctx, mark)
	return Submitted{Create: cr, Start: &st}, nil
}

// Add adds nodes to running workflow id (a fan-out, wf_add, refused whole
// when full names a queue too full for them), then writes and activates
// the ones it added. done reports that they were: false when wf_add
// refused them, or when their writes are left to the sweep (logged).
func (e *Engine) Add(ctx context.Context, id string, now time.Time, maxNodes int, full rdb.FullQueue, nodes []rdb.WorkflowNode) (
	res rdb.AddResult, done bool, err error,
) {
	// Marked before wf_add: a call whose wf_add landed unanswered leaves
	// definitions that only the sweep may write, if the node never adds
	// them again (it is cancelled, or fails for good).
	mark := rdb.NewAttention(id, now.UnixMilli())
	if err := e.rdb.WorkflowMark(ctx, mark, false); err != nil {
		return rdb.AddResult{}, false, err
	}
	res, err = e.rdb.WorkflowAdd(ctx, id, now, maxNodes, full, nodes)
	if err != nil {
		return res, false, err // the mark stays for the sweep
	}
	if res.Outcome != rdb.AddOK {
		_ = e.rdb.WorkflowUnmark(ctx, mark)
		return res, false, nil
	}
	var pending []rdb.WorkflowNode
	for _, n := range res.Nodes {
		if n.Def != nil {
			pending = append(pending, *n.Def)
		}
	}
	if len(pending) > 0 {
		// What does not land now, the sweep completes from the definitions.
		if _, err := e.activate(ctx, id, pending, now); err != nil {
			e.log.Warn("workflow fan-out left to maintenance", "workflow_id", id, "err", err)
			return res, false, nil // the nodes exist: the sweep writes and releases them
		}
	}
	_ = e.rdb.WorkflowUnmark(ctx, mark)
	return res, true, nil
}

// Cancel cancels workflow id (see cancel) under a mark in the attention
// index, so that the sweep finishes a cancel cut short. ErrNotFound for an
// unknown workflow.
func (e *Engine) Cancel(ctx context.Context, id string) (ended bool, err error) {
	mark := rdb.NewAttention(id, e.cfg.Clock().UnixMilli())
	if err := e.rdb.WorkflowMark(ctx, mark, false); err != nil {
		return false, err
	}
	ended, err = e.cancel(ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err // the mark stays for the sweep
	}
	_ = e.rdb.WorkflowUnmark(ctx, mark)
	return ended, err
}

// queueRefresh is how often RunMaintenance looks for new queues: a node's
// end on a queue it has no relay for yet waits up to this long.
const queueRefresh = 2 * time.Second

// RunMaintenance runs the sweep and the relays of every registered queue
// (looked up every 2 s) until ctx ends.
func (e *Engine) RunMaintenance(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { e.RunSweep(ctx) })
	e.RunRelays(ctx, func(ctx context.Context) []string {
		qs, err := e.rdb.Queues(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("workflow maintenance: listing queues failed", "err", err)
		}
		return qs
	}, queueRefresh)
}

// Info reads workflow id as the API shows it: the live status of each
// released node is read from its task. ErrNotFound for an unknown or
// expired one.
func Info(ctx context.Context, r *rdb.RDB, id string) (*dtqtype.WorkflowInfo, error) {
	if !rdb.ValidWorkflowID(id) {
		return nil, ErrNotFound
	}
	g, err := r.ReadWorkflow(ctx, id)
	if errors.Is(err, rdb.ErrWorkflowNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	info := &dtqtype.WorkflowInfo{ID: id, Name: g.Name, Status: g.Status, CreatedAt: dtqtype.MillisTime(g.CreatedAt),
		FinishedAt: dtqtype.MillisTime(g.FinishedAt), CancelRequested: g.CancelRequested,
		OnFailureTaskID: g.OnFailureTaskID, Counts: map[dtqtype.Status]int{}}
	var live []rdb.NodeRef
	var liveAt []int
	for _, gn := range g.Nodes {
		n := dtqtype.WorkflowNodeInfo{Ref: gn.Ref, TaskID: gn.TaskID, Queue: gn.Queue, Deps: gn.Deps, Status: gn.Status,
			ErrorClass: gn.ErrorClass}
		if n.Deps == nil {
			n.Deps = []string{}
		}
		if gn.Status == rdb.NodeReleased {
			live = append(live, rdb.NodeRef{Ref: gn.Ref, TaskID: gn.TaskID, Queue: gn.Queue})
			liveAt = append(liveAt, len(info.Nodes))
			n.Status = dtqtype.StatusQueued
		}
		info.Nodes = append(info.Nodes, n)
	}
	sts, err := r.TaskStatuses(ctx, live)
	if err != nil {
		return nil, err
	}
	for i, st := range sts {
		// The task's own status, an end the relay has not recorded yet
		// included: a node never shows queued once its task ran.
		if st != "" {
			info.Nodes[liveAt[i]].Status = st
		}
	}
	slices.SortFunc(info.Nodes, func(a, b dtqtype.WorkflowNodeInfo) int { return strings.Compare(a.TaskID, b.TaskID) })
	for _, n := range info.Nodes {
		info.Counts[n.Status]++
	}
	return info, nil
}
