package engine

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Sweep pacing.
const (
	// sweepAge is how old an attention entry must be before the sweep
	// takes it: younger ones belong to steps still under way.
	sweepAge = 3 * time.Second
	// sweepEvery is how often a process sweeps.
	sweepEvery = 2 * time.Second
)

// RunSweep sweeps the attention index every sweepEvery (jittered), at once
// again while a sweep was full, until ctx ends: the lifecycle every
// background loop shares (maintenance.Run).
func (e *Engine) RunSweep(ctx context.Context) {
	maintenance.Run(ctx, maintenance.Service{Name: "workflow sweep", Logger: e.log, MaxSleep: sweepEvery,
		Step: func(ctx context.Context) (maintenance.Result, error) {
			full, err := e.sweep(ctx, sweepAge)
			return maintenance.Result{Full: full}, err
		}})
}

// sweepBatch bounds the workflows one sweep finishes.
const sweepBatch = 100

// sweep finishes what the workflows marked before age ago need, then
// removes their marks unless marked again meanwhile. full reports a whole
// batch finished: more may be due.
func (e *Engine) sweep(ctx context.Context, age time.Duration) (full bool, err error) {
	due, err := e.rdb.WorkflowsNeedingAttention(ctx, e.cfg.Clock().Add(-age), sweepBatch)
	if err != nil {
		return false, err
	}
	failed := 0
	for _, a := range due {
		if err := e.finish(ctx, a); err != nil {
			e.log.Warn("workflow sweep: finishing failed; retrying with backoff", "workflow_id", a.ID,
				"tries", a.Tries+1, "err", err)
			failed++
			if err := e.retryLater(ctx, a); err != nil {
				return false, err
			}
			continue
		}
		if err := e.rdb.WorkflowUnmark(ctx, a); err != nil {
			return false, err
		}
	}
	// Entries left after a failure come back in the next batch: calling again
	// at once would only spin on them.
	return len(due) == sweepBatch && failed == 0, nil
}

// sweepBackoff bounds how long a workflow whose finish keeps failing waits
// for its next try.
const sweepBackoff = 5 * time.Minute

// retryLater moves a's entry, whose finish failed, to a score in the
// future that doubles with its tries (sweepEvery, then twice that, up to
// sweepBackoff), so that the sweep retries a failing workflow at a bounded
// rate instead of every pass; the index keeps one entry for it. The new
// entry is written before the old one is removed (compare and remove): a
// crash between leaves both, never none.
func (e *Engine) retryLater(ctx context.Context, a rdb.Attention) error {
	wait := sweepEvery << min(a.Tries, 10)
	next := a.Retry(e.cfg.Clock().Add(min(wait, sweepBackoff) - sweepAge).UnixMilli())
	if err := e.rdb.WorkflowMark(ctx, next, false); err != nil {
		return err
	}
	return e.rdb.WorkflowUnmark(ctx, a)
}

// finish does what workflow a.ID needs: a listing entry, its definitions
// written and activated (a submission or fan-out cut short), its stored
// releases carried out, a cancel's node cancels, events and on_failure.
func (e *Engine) finish(ctx context.Context, a rdb.Attention) error {
	s, err := e.rdb.ReadWorkflowState(ctx, a.ID)
	if errors.Is(err, rdb.ErrWorkflowNotFound) {
		return e.rdb.DropFromWorkflowIndex(ctx, []string{a.ID})
	}
	if err != nil {
		return err
	}
	if !s.Listed {
		if err := e.rdb.WorkflowMark(ctx, a, true); err != nil {
			return err
		}
		if err := e.rdb.WorkflowNote(ctx, a.ID, rdb.NoteListed, "1"); err != nil {
			return err
		}
	}
	defs, err := e.rdb.WorkflowDefinitions(ctx, a.ID)
	if err != nil {
		return err
	}
	if len(defs) > 0 || s.Status == dtqtype.WorkflowSubmitting {
		if _, err := e.activate(ctx, a.ID, defs, e.cfg.Clock()); err != nil {
			return err
		}
	}
	if err := e.applyParked(ctx, a.ID); err != nil {
		return err
	}
	if err := e.carryOut(ctx, a.ID, nil, true); err != nil {
		return err
	}
	if s.CancelRequested {
		if _, err := e.cancel(ctx, a.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return e.effects(ctx, a.ID)
}

// applyParked applies the ends of workflow id the relay parked (wf_park),
// in chunks; each leaves the parked hash as it is applied. An end that
// fails again stays parked, and does not hold back the others.
func (e *Engine) applyParked(ctx context.Context, id string) error {
	var cursor uint64
	var first error
	for {
		es, next, err := e.rdb.WorkflowParked(ctx, id, cursor, rdb.ReleaseChunk)
		if err != nil {
			return err
		}
		for i := range es {
			if _, _, err := e.apply(ctx, &es[i], true); err != nil {
				first = cmp.Or(first, err)
			}
		}
		if cursor = next; cursor == 0 || ctx.Err() != nil {
			return cmp.Or(first, ctx.Err())
		}
	}
}

// cancel marks workflow id cancelled and cancels each node not ended in its
// slot, a page of nodes at a time (wf_cancel). It reports whether the
// workflow had ended already. A node whose cancel fails does not hold back
// the others; the first error is returned once every page is done (the
// sweep repeats the cancel).
func (e *Engine) cancel(ctx context.Context, id string) (ended bool, err error) {
	now := e.cfg.Clock()
	var cursor uint64
	var first error
	for {
		out, _, nodes, next, err := e.rdb.WorkflowCancel(ctx, id, now, cursor)
		switch {
		case err != nil:
			return false, err
		case out == rdb.OutcomeNotFound:
			return false, ErrNotFound
		case out == rdb.OutcomeTerminal:
			return cursor == 0, first
		}
		for _, n := range nodes {
			if _, _, err := e.rdb.CancelTask(ctx, n.Queue, n.TaskID, &e.admin, now, "workflow cancelled"); err != nil {
				first = cmp.Or(first, err)
			}
		}
		if cursor = next; cursor == 0 || ctx.Err() != nil {
			return false, cmp.Or(first, ctx.Err())
		}
	}
}
