package rdb

import (
	"context"
	"time"
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
	v, err := r.callPromote(ctx, &promoteKeys{
		Schedule: k.Schedule(queue), Expiry: k.Expiry(queue), Events: k.Events(queue), Depth: k.Depth(queue),
		Bands: r.bandStreams(queue), Retained: k.Retained(queue), Outbox: k.WorkflowOutbox(queue),
	}, &promoteArgs{
		Now: now.UnixMilli(), TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue), Max: MaxPerCall,
		EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention), Outcomes: boolArg(r.outcomesOnly(ctx, queue)),
	})
	return progressOf(v.Moved, v.NextDue, v.Examined), err
}

// SweepExpired expires overdue pending/queued/retrying tasks of queue.
func (r *RDB) SweepExpired(ctx context.Context, queue string, s *WorkerSettings, now time.Time) (Progress, error) {
	k := r.keys
	v, err := r.callSweepExpired(ctx, &sweepExpiredKeys{
		Expiry: k.Expiry(queue), Schedule: k.Schedule(queue), Events: k.Events(queue), Depth: k.Depth(queue),
		Bands: r.bandStreams(queue), Retained: k.Retained(queue), Outbox: k.WorkflowOutbox(queue),
	}, &sweepExpiredArgs{
		Now: now.UnixMilli(), TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue), Max: MaxPerCall,
		EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention),
	})
	return progressOf(v.Expired, v.NextDue, v.Examined), err
}

// progressOf reads a promotion's or a sweep's reply: next < 0 when
// nothing is due.
func progressOf(done, next, examined int64) Progress {
	p := Progress{Done: int(done), Full: examined >= MaxPerCall}
	if next >= 0 {
		p.Next = time.UnixMilli(next)
	}
	return p
}

// PruneConsumers removes the group's consumers on queue's streams that have
// nothing pending and were idle for at least idle.
func (r *RDB) PruneConsumers(ctx context.Context, queue string, idle time.Duration) (int64, error) {
	return r.callPruneConsumers(ctx, &pruneConsumersKeys{Bands: r.bandStreams(queue)},
		&pruneConsumersArgs{Group: Group, IdleMS: idle.Milliseconds()})
}
