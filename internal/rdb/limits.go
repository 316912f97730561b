package rdb

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// SetLimits replaces queue's limits (nil, or limits with nothing set,
// removes them); a rate's burst below 1 is stored as 1. It reports whether
// limits existed before. The caller checks the ranges. Fairness, key_rate
// or key_order turn on the key queues (the field "fair"); limits without
// them move the key queues' tasks back into the band streams.
func (r *RDB) SetLimits(ctx context.Context, queue string, l *dtqtype.QueueLimits) (bool, error) {
	k := r.keys
	args := []any{"set", k.FairActivePrefix(queue), k.KeyQueuePrefix(queue), k.TaskPrefix(queue)}
	add := func(f string, v int64) {
		if v > 0 {
			args = append(args, f, v)
		}
	}
	fair := false
	if l != nil {
		if rl := l.Rate; rl != nil && rl.Limit > 0 {
			add("rate_limit", int64(rl.Limit))
			add("rate_period_ms", time.Duration(rl.Period).Milliseconds())
			add("burst", int64(max(1, rl.Burst)))
		}
		add("concurrency", int64(l.Concurrency))
		add("key_concurrency", int64(l.KeyConcurrency))
		if f := l.Fairness; f != nil {
			fair = true
			add("fair_default", int64(max(1, f.DefaultWeight)))
			for key, w := range f.Weights {
				add("w:"+key, int64(w))
			}
		}
		if rl := l.KeyRate; rl != nil && rl.Limit > 0 {
			fair = true
			add("key_rate_limit", int64(rl.Limit))
			add("key_rate_period_ms", time.Duration(rl.Period).Milliseconds())
			add("key_burst", int64(max(1, rl.Burst)))
		}
		if l.KeyOrder == "fifo" {
			fair = true
			args = append(args, "key_order", "fifo")
		}
		if fair {
			add("fair", 1)
		}
	}
	if len(args) == 4 {
		args[0] = "delete"
	}
	keys := append([]string{k.Limits(queue), k.Rate(queue), k.FairState(queue), k.FairKeys(queue), k.FairDelay(queue),
		k.KeyRate(queue)}, r.bandStreams(queue)...)
	keys = append(keys, k.FairOn(queue))
	n, err := r.run(ctx, scriptLimits, keys, args...).Int64()
	if err == nil {
		r.sawKeyQueues(queue, fair)
	}
	return n == 1, err
}

// fairFlagTTL is how long the ingest path trusts what it last read of a
// queue's fair flag. A stale "off" costs nothing but speed: the task goes
// to its band stream, and the next claim sorts it into its key queue; a
// stale "on" only passes keys the script then does not use.
const fairFlagTTL = time.Second

// fairFlag is what was last read of a queue's fair flag, and when.
type fairFlag struct {
	on bool
	at time.Time
}

// keyQueues reports whether queue has key queues, as read at most
// fairFlagTTL ago (one EXISTS a second per queue otherwise). On an error
// it answers what it knew: the ingest script checks the flag itself.
func (r *RDB) keyQueues(ctx context.Context, queue string) bool {
	now := time.Now()
	r.fairMu.Lock()
	f, ok := r.fairFlags[queue]
	r.fairMu.Unlock()
	if ok && now.Sub(f.at) < fairFlagTTL {
		return f.on
	}
	n, err := r.c.Exists(ctx, r.keys.FairOn(queue)).Result()
	if err != nil {
		return f.on
	}
	r.sawKeyQueues(queue, n == 1)
	return n == 1
}

// sawKeyQueues records what was read (or just written) of queue's fair flag.
func (r *RDB) sawKeyQueues(queue string, on bool) {
	r.fairMu.Lock()
	defer r.fairMu.Unlock()
	if r.fairFlags == nil {
		r.fairFlags = map[string]fairFlag{}
	}
	r.fairFlags[queue] = fairFlag{on: on, at: time.Now()}
}

// GetLimits reads queue's limits, nil when none are set.
func (r *RDB) GetLimits(ctx context.Context, queue string) (*dtqtype.QueueLimits, error) {
	m, err := r.c.HGetAll(ctx, r.keys.Limits(queue)).Result()
	if err != nil {
		return nil, err
	}
	return parseLimits(m), nil
}

// TopKeys reads the n keys of queue with the most tasks in key queues.
func (r *RDB) TopKeys(ctx context.Context, queue string, n int) ([]dtqtype.KeyBacklog, error) {
	zs, err := r.c.ZRevRangeWithScores(ctx, r.keys.FairKeys(queue), 0, int64(n-1)).Result()
	if err != nil {
		return nil, err
	}
	return keyBacklogs(zs), nil
}

// parseLimits reads the limits hash's fields (see limits.lua); nil when
// none is set.
func parseLimits(m map[string]string) *dtqtype.QueueLimits {
	n := func(f string) int { v, _ := strconv.Atoi(m[f]); return v }
	l := &dtqtype.QueueLimits{Concurrency: n("concurrency"), KeyConcurrency: n("key_concurrency"), KeyOrder: m["key_order"]}
	if rl := n("rate_limit"); rl > 0 {
		l.Rate = &dtqtype.RateLimit{Limit: rl, Period: dtqtype.Duration(time.Duration(n("rate_period_ms")) * time.Millisecond),
			Burst: n("burst")}
	}
	if rl := n("key_rate_limit"); rl > 0 {
		l.KeyRate = &dtqtype.RateLimit{Limit: rl, Period: dtqtype.Duration(time.Duration(n("key_rate_period_ms")) * time.Millisecond),
			Burst: n("key_burst")}
	}
	if dw := n("fair_default"); dw > 0 {
		l.Fairness = &dtqtype.Fairness{DefaultWeight: dw}
		for f, v := range m {
			if key, ok := strings.CutPrefix(f, "w:"); ok {
				if l.Fairness.Weights == nil {
					l.Fairness.Weights = map[string]int{}
				}
				l.Fairness.Weights[key], _ = strconv.Atoi(v)
			}
		}
	}
	if l.Rate == nil && l.Concurrency == 0 && l.KeyConcurrency == 0 && l.Fairness == nil && l.KeyRate == nil && l.KeyOrder == "" {
		return nil
	}
	return l
}

// keyBacklogs turns the fair keys ZSET's members into backlogs.
func keyBacklogs(zs []redis.Z) []dtqtype.KeyBacklog {
	out := make([]dtqtype.KeyBacklog, 0, len(zs))
	for _, z := range zs {
		if key, _ := z.Member.(string); z.Score > 0 {
			out = append(out, dtqtype.KeyBacklog{Key: key, Queued: int64(z.Score)})
		}
	}
	return out
}
