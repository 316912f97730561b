package rdb

import (
	"context"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// SetLimits replaces queue's limits (nil, or limits with nothing set,
// removes them); a rate's burst below 1 is stored as 1. It reports whether
// limits existed before. The caller checks the ranges.
func (r *RDB) SetLimits(ctx context.Context, queue string, l *dtqtype.QueueLimits) (bool, error) {
	k := r.keys
	args := []any{"set"}
	add := func(f string, v int64) {
		if v > 0 {
			args = append(args, f, v)
		}
	}
	if l != nil {
		if rl := l.Rate; rl != nil && rl.Limit > 0 {
			add("rate_limit", int64(rl.Limit))
			add("rate_period_ms", time.Duration(rl.Period).Milliseconds())
			add("burst", int64(max(1, rl.Burst)))
		}
		add("concurrency", int64(l.Concurrency))
		add("key_concurrency", int64(l.KeyConcurrency))
	}
	if len(args) == 1 {
		args = []any{"delete"}
	}
	n, err := r.run(ctx, scriptLimits, []string{k.Limits(queue), k.Rate(queue)}, args...).Int64()
	return n == 1, err
}

// GetLimits reads queue's limits, nil when none are set.
func (r *RDB) GetLimits(ctx context.Context, queue string) (*dtqtype.QueueLimits, error) {
	m, err := r.c.HGetAll(ctx, r.keys.Limits(queue)).Result()
	if err != nil {
		return nil, err
	}
	return parseLimits(m), nil
}

// parseLimits reads the limits hash's fields (see limits.lua); nil when
// none is set.
func parseLimits(m map[string]string) *dtqtype.QueueLimits {
	n := func(f string) int { v, _ := strconv.Atoi(m[f]); return v }
	l := &dtqtype.QueueLimits{Concurrency: n("concurrency"), KeyConcurrency: n("key_concurrency")}
	if rl := n("rate_limit"); rl > 0 {
		l.Rate = &dtqtype.RateLimit{Limit: rl, Period: dtqtype.Duration(time.Duration(n("rate_period_ms")) * time.Millisecond),
			Burst: n("burst")}
	}
	if l.Rate == nil && l.Concurrency == 0 && l.KeyConcurrency == 0 {
		return nil
	}
	return l
}
