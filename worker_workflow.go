package dtq

import (
	"context"

	"github.com/dtq-io/dtq/internal/rdb"
)

// newWorkflows gives the worker its workflow engine: the relay of each
// served queue's outbox, the sweep, and c, the Client behind AddNodes (and
// on_failure), which the scheduler also submits with. The engine logs with
// the worker's logger.
func (w *Worker) newWorkflows(c *Client) {
	c.wf = c.newEngine(w.dep, w.cfg.Logger)
	w.nodes, w.wf = c, c.wf
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
