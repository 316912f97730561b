package dtq

import (
	"context"

	"github.com/dtq-io/dtq/internal/rdb"
)

// pendingSubmit is one validated submission waiting for its ingest call.
type pendingSubmit struct {
	n    *normalized
	task rdb.NewTask
}

// submitOutcome is one submission's answer.
type submitOutcome struct {
	res *SubmitResult
	err error
}

// newSubmitBatcher merges concurrent Submit calls for one queue into one
// ingest script call.
func (c *Client) newSubmitBatcher(queue string) *groupCommit[*pendingSubmit, submitOutcome] {
	return &groupCommit[*pendingSubmit, submitOutcome]{
		max:      maxScriptTasks,
		flushers: 2,
		run: func(batch []*pendingSubmit) ([]submitOutcome, error) {
			ctx := context.Background() // callers may give up; the write must not be cut in half
			now := c.cfg.Clock()
			tasks := make([]rdb.NewTask, len(batch))
			for i, p := range batch {
				tasks[i] = p.task
			}
			res, err := c.rdb.Ingest(ctx, queue, now, c.ingestOptions(), tasks)
			if err != nil {
				return nil, err
			}
			out := make([]submitOutcome, len(batch))
			for i, p := range batch {
				r, e := c.outcome(ctx, p.n, &tasks[i], now, res[i])
				out[i] = submitOutcome{res: r, err: e}
			}
			return out, nil
		},
	}
}
