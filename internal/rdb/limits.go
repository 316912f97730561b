package rdb

import (
	"context"
	"strconv"
	"time"
)

// Limits are a queue's flow-control settings; zero fields are unset.
type Limits struct {
	RateLimit      int           // task starts per RatePeriod
	RatePeriod     time.Duration //
	Burst          int           // starts an idle queue may make at once (default 1)
	Concurrency    int           // running tasks at once, across all workers
	KeyConcurrency int           // running tasks at once per concurrency key
}

// IsZero reports whether no limit is set.
func (l Limits) IsZero() bool { return l == Limits{} }

// SetLimits replaces queue's limits (a zero Limits removes them). It
// reports whether limits existed before.
func (r *RDB) SetLimits(ctx context.Context, queue string, l Limits) (bool, error) {
	k := r.keys
	args := []any{"delete"}
	if !l.IsZero() {
		args = []any{"set"}
		add := func(f string, v int64) {
			if v > 0 {
				args = append(args, f, v)
			}
		}
		add("rate_limit", int64(l.RateLimit))
		if l.RateLimit > 0 {
			add("rate_period_ms", l.RatePeriod.Milliseconds())
			add("burst", int64(max(1, l.Burst)))
		}
		add("concurrency", int64(l.Concurrency))
		add("key_concurrency", int64(l.KeyConcurrency))
	}
	n, err := r.run(ctx, scriptLimits, []string{k.Limits(queue), k.Rate(queue)}, args...).Int64()
	return n == 1, err
}

// GetLimits reads queue's limits.
func (r *RDB) GetLimits(ctx context.Context, queue string) (Limits, error) {
	m, err := r.c.HGetAll(ctx, r.keys.Limits(queue)).Result()
	if err != nil {
		return Limits{}, err
	}
	return parseLimits(m), nil
}

// parseLimits reads the limits hash's fields (see limits.lua).
func parseLimits(m map[string]string) Limits {
	n := func(f string) int { v, _ := strconv.Atoi(m[f]); return v }
	return Limits{RateLimit: n("rate_limit"), RatePeriod: time.Duration(n("rate_period_ms")) * time.Millisecond,
		Burst: n("burst"), Concurrency: n("concurrency"), KeyConcurrency: n("key_concurrency")}
}
