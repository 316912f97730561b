package rdb

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// QueueSizes reads the sizes of queues (the cheap part of a queue's
// state: its depth counter and the sizes of its lease, schedule, waiting and
// dead-letter sets, six commands a queue against about thirty for
// QueueInfo), in the order given, with one pipeline. Metrics and list
// totals use it to cover every queue without reading each queue's streams.
func (r *RDB) QueueSizes(ctx context.Context, queues []string, now time.Time) ([]dtqtype.QueueSize, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	k := r.keys
	type cmds struct {
		depth             *redis.StringCmd
		lease, sched, dlq *redis.IntCmd
		waiting           *redis.IntCmd
		paused            *redis.IntCmd
		retained          *redis.MapStringStringCmd
	}
	pipe := r.c.Pipeline()
	cs := make([]cmds, len(queues))
	for i, q := range queues {
		cs[i] = cmds{depth: pipe.Get(ctx, k.Depth(q)), lease: pipe.ZCard(ctx, k.Lease(q)),
			sched: pipe.ZCard(ctx, k.Schedule(q)), waiting: pipe.ZCard(ctx, k.Waiting(q)), dlq: pipe.ZCard(ctx, k.DLQ(q)), paused: pipe.Exists(ctx, k.Paused(q)),
			retained: pipe.HGetAll(ctx, k.Retained(q))}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]dtqtype.QueueSize, len(queues))
	for i, q := range queues {
		c := cs[i]
		out[i] = dtqtype.QueueSize{Name: q, Running: c.lease.Val(), Scheduled: c.sched.Val(), Waiting: c.waiting.Val(), DLQ: c.dlq.Val(),
			Paused: c.paused.Val() == 1}
		out[i].Depth, _ = strconv.ParseInt(c.depth.Val(), 10, 64)
		for _, n := range retainedCounts(c.retained.Val(), now) {
			out[i].Retained += n
		}
	}
	return out, nil
}
