package dtq

import (
	"context"
	"slices"
	"sync"

	"github.com/dtq-io/dtq/internal/rdb"
)

// batcher merges concurrent Submit calls for one queue into one ingest
// script call (group commit): while a call is in flight, new submissions
// wait and the next call takes them all. Nobody waits on a timer, so a lone
// Submit costs one round trip. A flusher goroutine runs only while
// submissions are pending.
type batcher struct {
	c     *Client
	queue string

	mu       sync.Mutex
	pending  []*pendingSubmit
	flushing bool
}

type pendingSubmit struct {
	n    *normalized
	task rdb.NewTask
	done chan submitOutcome
}

type submitOutcome struct {
	res *SubmitResult
	err error
}

func (b *batcher) submit(ctx context.Context, p *pendingSubmit) (*SubmitResult, error) {
	b.mu.Lock()
	b.pending = append(b.pending, p)
	if !b.flushing {
		b.flushing = true
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case o := <-p.done:
		return o.res, o.err
	case <-ctx.Done():
		b.mu.Lock()
		if i := slices.Index(b.pending, p); i >= 0 {
			// Not sent yet: withdraw it, nothing was written.
			b.pending = slices.Delete(b.pending, i, i+1)
			b.mu.Unlock()
			return nil, ctx.Err()
		}
		b.mu.Unlock()
		// Already on its way to Redis: its outcome is the truth.
		o := <-p.done
		return o.res, o.err
	}
}

func (b *batcher) flush() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), maxScriptTasks)
		batch := slices.Clone(b.pending[:n])
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		b.run(batch)
	}
}

func (b *batcher) run(batch []*pendingSubmit) {
	ctx := context.Background() // callers may give up; the write must not be cut in half
	now := b.c.cfg.Clock()
	tasks := make([]rdb.NewTask, len(batch))
	for i, p := range batch {
		tasks[i] = p.task
	}
	res, err := b.c.rdb.Ingest(ctx, b.queue, now, b.c.ingestOptions(), tasks)
	for i, p := range batch {
		if err != nil {
			p.done <- submitOutcome{err: err}
			continue
		}
		r, e := b.c.outcome(ctx, p.n, &tasks[i], now, res[i])
		p.done <- submitOutcome{res: r, err: e}
	}
}
