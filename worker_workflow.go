package dtq

import (
	"context"
	"fmt"

	"github.com/dtq-io/dtq/internal/rdb"
)

// newWorkflows gives the worker its workflow engine: the relay of each
// served queue's outbox, the sweep, and the Client behind AddNodes (and
// on_failure), configured like the scheduler's (SchedulerClient).
func (w *Worker) newWorkflows() error {
	var cc ClientConfig
	if w.cfg.SchedulerClient != nil {
		cc = *w.cfg.SchedulerClient
	}
	cc.KeyPrefix, cc.EventsMaxLen, cc.Clock = w.cfg.KeyPrefix, w.cfg.EventsMaxLen, w.cfg.Clock
	cc.ReplicaAcks, cc.ReplicaAckTimeout = w.cfg.ReplicaAcks, w.cfg.ReplicaAckTimeout
	c, err := NewClient(w.rdb.Client(), &cc)
	if err != nil {
		return fmt.Errorf("dtq: WorkerConfig.SchedulerClient: %w", err)
	}
	w.wf = newWorkflows(w.rdb, c, w.cfg.Clock, w.cfg.Logger, w.cfg.EventsMaxLen, w.cfg.SucceededRetention,
		w.cfg.FailedRetention, c.cfg.MaxWorkflowNodes)
	c.wf = w.wf
	return nil
}

// handlerContext is the context a task's handler runs under: the worker's
// key prefix (IdempotentOperation) and, for a workflow node, its lease for
// AddNodes.
func (w *Worker) handlerContext(ctx context.Context, ct *rdb.ClaimedTask) context.Context {
	ctx = withWorkerPrefix(ctx, w.cfg.KeyPrefix)
	if ct.Workflow == "" {
		return ctx
	}
	return context.WithValue(ctx, nodeKey{}, &nodeCtx{client: w.wf.client,
		lease: NodeLease{Queue: ct.Queue, TaskID: ct.ID, Attempt: ct.Attempt, WorkerID: w.cfg.WorkerID}})
}
