package dtq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// Workflow event types on the _sys stream.
const (
	EventWorkflowStarted   = "WORKFLOW_STARTED"
	EventWorkflowSucceeded = "WORKFLOW_SUCCEEDED"
	EventWorkflowFailed    = "WORKFLOW_FAILED"
	EventWorkflowCancelled = "WORKFLOW_CANCELLED"
)

// newEngine is the workflow engine of c (internal/workflow/engine), with
// the deployment settings dep: it submits on_failure tasks through c.
func (c *Client) newEngine(dep deployment, log *slog.Logger) *engine.Engine {
	failed := scriptRetention(dep.failedRetention)
	return engine.New(c.rdb, &engine.Config{Clock: dep.clock, Logger: log, EventsMaxLen: dep.eventsMaxLen,
		FailedRetention: failed, Retention: max(scriptRetention(dep.succeededRetention), failed),
		RecentCap: DefaultStreamMaxLen, IdempotencyTTL: dep.idempotencyTTL, SubmitOnFailure: c.submitOnFailure})
}

// submitOnFailure submits t, workflow id's on_failure task, through the
// normal ingest path and returns the id of the task its key names.
func (c *Client) submitOnFailure(ctx context.Context, id, queue string, now time.Time, t *rdb.NewTask) (string, error) {
	res, err := c.ingestSure(ctx, queue, now, []rdb.NewTask{*t})
	if err != nil {
		return "", err
	}
	r := res[0]
	switch r.Outcome {
	case rdb.Created, rdb.Duplicate, rdb.InProgress:
	default:
		return "", onFailureRefused(id, queue, r)
	}
	if r.TaskID == "" {
		return t.ID, nil
	}
	return r.TaskID, nil
}

// onFailureRefused says why a workflow's on_failure task was not
// submitted, from the ingest outcome that refused it.
func onFailureRefused(id, queue string, r rdb.IngestResult) error {
	prefix := "dtq: workflow " + id + ": on_failure not submitted: "
	switch r.Outcome {
	case rdb.QueueFull:
		return fmt.Errorf("%squeue %q is full (%d live tasks, its depth limit): %w", prefix, queue, r.Depth, ErrQueueFull)
	case rdb.Mismatch:
		return fmt.Errorf("%sits idempotency key is held by task %s of another request: %w", prefix, r.TaskID, ErrIdempotencyKeyMismatch)
	case rdb.Absent:
		if r.Err == nil {
			return fmt.Errorf("%sits submission's reply was lost and it was not created", prefix)
		}
		return fmt.Errorf("%sits submission's reply was lost and it was not created: %w", prefix, r.Err)
	case rdb.Deduplicated:
		return fmt.Errorf("%sit was collapsed into task %s by a dedup key", prefix, r.TaskID)
	case rdb.Created, rdb.Duplicate, rdb.InProgress:
		// accepted: submitOnFailure never asks why these refused
	}
	return fmt.Errorf("%sunknown ingest outcome %d", prefix, r.Outcome)
}
