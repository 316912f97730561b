package dtq

import (
	"context"
	"fmt"

	"github.com/dtq-io/dtq/internal/rdb"
)

// newWorkflows gives the worker its workflow engine (the relay of each
// served queue's outbox and the sweep) and the Client behind AddNodes
// (and on_failure), configured like the scheduler's (SchedulerClient),
// whose engine it is.
func (w *Worker) newWorkflows() error {
	var own deployment
	if cc := w.cfg.SchedulerClient; cc != nil {
		own.idempotencyTTL = cc.IdempotencyTTL
	}
	own, err := own.resolve()
	if err != nil {
		return fmt.Errorf("dtq: WorkerConfig.SchedulerClient: %w", err)
	}
	dep := w.dep
	dep.idempotencyTTL = own.idempotencyTTL
	c, err := newClient(w.rdb.Client(), w.cfg.SchedulerClient, dep)
	if err != nil {
		return fmt.Errorf("dtq: WorkerConfig.SchedulerClient: %w", err)
	}
	c.wf = c.newEngine(dep, w.cfg.Logger) // the worker's logger
	w.nodes, w.wf = c, c.wf
	return nil
}

// handlerContext is the context a task's handler runs under: the worker's
// key prefix (IdempotentOperation) and, for a workflow node, its lease for
// AddNodes.
func (w *Worker) handlerContext(ctx context.Context, ct *rdb.ClaimedTask) context.Context {
	ctx = withWorkerPrefix(ctx, w.dep.keyPrefix)
	if ct.Workflow == "" {
		return ctx
	}
	return context.WithValue(ctx, nodeKey{}, &nodeCtx{client: w.nodes,
		lease: NodeLease{Queue: ct.Queue, TaskID: ct.ID, Attempt: ct.Attempt, WorkerID: w.cfg.WorkerID}})
}
