package rdb

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxPerCall bounds the tasks promotion and the expiry sweep handle per call.
const MaxPerCall = 500

// Progress is what one maintenance call did.
type Progress struct {
	Done int       // tasks moved (promotion) or expired (sweep)
	Next time.Time // the next due time or deadline; zero when none
	Full bool      // the call examined MaxPerCall entries: more may be due now
}

// Promote moves due pending/retrying tasks of queue to their streams.
func (r *RDB) Promote(ctx context.Context, queue string, s *WorkerSettings, now time.Time) (Progress, error) {
	k := r.keys
	keys := append([]string{k.Schedule(queue), k.Expiry(queue), k.Events(queue), k.Depth(queue)}, r.bandStreams(queue)...)
	return r.countAndNext(r.run(ctx, scriptPromote, append(keys, k.Retained(queue), k.WorkflowOutbox(queue)), now.UnixMilli(), k.TaskPrefix(queue),
		k.IdempotencyPrefix(queue), MaxPerCall, s.EventsMaxLen, seconds(s.FailedRetention), boolArg(r.outcomesOnly(ctx, queue))))
}

// SweepExpired expires overdue pending/queued/retrying tasks of queue.
func (r *RDB) SweepExpired(ctx context.Context, queue string, s *WorkerSettings, now time.Time) (Progress, error) {
	k := r.keys
	keys := append([]string{k.Expiry(queue), k.Schedule(queue), k.Events(queue), k.Depth(queue)}, r.bandStreams(queue)...)
	return r.countAndNext(r.run(ctx, scriptSweepExpired, append(keys, k.Retained(queue), k.WorkflowOutbox(queue)), now.UnixMilli(), k.TaskPrefix(queue),
		k.IdempotencyPrefix(queue), MaxPerCall, s.EventsMaxLen, seconds(s.FailedRetention)))
}

func (r *RDB) countAndNext(cmd *redis.Cmd) (Progress, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return Progress{}, err
	}
	if len(v) != 3 {
		return Progress{}, fmt.Errorf("rdb: malformed reply %v", v)
	}
	p := Progress{Done: int(v[0]), Full: v[2] >= MaxPerCall}
	if v[1] >= 0 {
		p.Next = time.UnixMilli(v[1])
	}
	return p, nil
}

// PruneConsumers removes the group's consumers on queue's streams that have
// nothing pending and were idle for at least idle.
func (r *RDB) PruneConsumers(ctx context.Context, queue string, idle time.Duration) (int64, error) {
	return r.run(ctx, scriptPruneConsumers, r.bandStreams(queue), Group, idle.Milliseconds()).Int64()
}
