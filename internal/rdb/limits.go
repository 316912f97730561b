package rdb

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// SetLimits replaces queue's limits and settings (nil, or limits with
// nothing set, removes them; events "full" is the default, stored as
// nothing); a rate's burst below 1 is stored as 1. It reports whether
// limits existed before. The caller checks the ranges. Fairness, key_rate
// or key_order turn on the key queues (the field "fair"); limits without
// them move the key queues' tasks back into the band streams.
func (r *RDB) SetLimits(ctx context.Context, queue string, l *dtqtype.QueueLimits) (bool, error) {
	k := r.keys
	var fields []any // field/value pairs
	add := func(f string, v int64) {
		if v > 0 {
			fields = append(fields, f, v)
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
			fields = append(fields, "key_order", "fifo")
		}
		if fair {
			add("fair", 1)
		}
		if l.Events == dtqtype.EventsOutcomes {
			fields = append(fields, "events", dtqtype.EventsOutcomes)
		}
	}
	mode := "set"
	if len(fields) == 0 {
		mode = "delete"
	}
	n, err := r.callLimits(ctx, &limitsKeys{
		Limits: k.Limits(queue), Rate: k.Rate(queue), FairState: k.FairState(queue), FairKeys: k.FairKeys(queue),
		FairDelay: k.FairDelay(queue), KeyRate: k.KeyRate(queue), Bands: r.bandStreams(queue), FairOn: k.FairOn(queue),
	}, &limitsArgs{
		Mode: mode, FairActive: k.FairActivePrefix(queue), KeyQueue: k.KeyQueuePrefix(queue), TaskPrefix: k.TaskPrefix(queue),
		Fields: fields,
	})
	if err == nil {
		r.sawFlags(queue, queueFlags{fair: fair, outcomes: l != nil && l.Events == dtqtype.EventsOutcomes})
	}
	return n == 1, err
}

// fairFlagTTL is how long the ingest path trusts what it last read of a
// queue's flags (fair, events). A stale "off" costs nothing but speed: the
// task goes to its band stream, and the next claim sorts it into its key
// queue; a stale "on" only passes keys the script then does not use. A
// stale events setting writes, for that second, the creation events of the
// setting before.
const fairFlagTTL = time.Second

// queueFlags is what was last read of a queue's settings the scripts
// cannot read for free, and when.
type queueFlags struct {
	fair     bool // the queue has key queues (the fair flag)
	outcomes bool // events: outcomes (dtqtype.EventsOutcomes)
	at       time.Time
}

// keyQueues reports whether queue has key queues, as read at most
// fairFlagTTL ago.
func (r *RDB) keyQueues(ctx context.Context, queue string) bool {
	return r.flags(ctx, queue).fair
}

// outcomesOnly reports whether queue writes only outcome events (events:
// outcomes), as read at most fairFlagTTL ago.
func (r *RDB) outcomesOnly(ctx context.Context, queue string) bool {
	return r.flags(ctx, queue).outcomes
}

// flags reads queue's fair flag and events setting from its limits hash
// (limits.lua keeps the fair flag's key in step with the field "fair") at
// most once per fairFlagTTL: one HMGET a second per queue. On an error it
// answers what it knew: the ingest script checks the fair flag itself.
func (r *RDB) flags(ctx context.Context, queue string) queueFlags {
	r.fairMu.Lock()
	f, ok := r.fairFlags[queue]
	r.fairMu.Unlock()
	if ok && time.Since(f.at) < fairFlagTTL { // reads only the monotonic clock
		return f
	}
	v, err := r.c.HMGet(ctx, r.keys.Limits(queue), "fair", "events").Result()
	if err != nil || len(v) != 2 {
		return f
	}
	ev, _ := v[1].(string)
	f = queueFlags{fair: v[0] != nil, outcomes: ev == dtqtype.EventsOutcomes}
	r.sawFlags(queue, f)
	return f
}

// sawFlags records what was read (or just written) of queue's flags.
func (r *RDB) sawFlags(queue string, f queueFlags) {
	f.at = time.Now()
	r.fairMu.Lock()
	defer r.fairMu.Unlock()
	if r.fairFlags == nil {
		r.fairFlags = map[string]queueFlags{}
	}
	r.fairFlags[queue] = f
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
	l := &dtqtype.QueueLimits{Concurrency: n("concurrency"), KeyConcurrency: n("key_concurrency"), KeyOrder: m["key_order"],
		Events: m["events"]}
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
	if l.Rate == nil && l.Concurrency == 0 && l.KeyConcurrency == 0 && l.Fairness == nil && l.KeyRate == nil && l.KeyOrder == "" &&
		l.Events == "" {
		return nil
	}
	return l
}

// keyBacklogs turns the fair keys ZSET's members into backlogs.
func keyBacklogs(zs []redis.Z) []dtqtype.KeyBacklog {
	out := make([]dtqtype.KeyBacklog, 0, len(zs))
	for _, z := range zs {
		if key := zMember(z); z.Score > 0 {
			out = append(out, dtqtype.KeyBacklog{Key: key, Queued: int64(z.Score)})
		}
	}
	return out
}
