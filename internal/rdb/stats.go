package rdb

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// MinuteRange reads the per-minute counters of each queue for [from, to]
// (epoch minutes) in one pipeline: per queue, oldest minute first.
func (r *RDB) MinuteRange(ctx context.Context, queues []string, from, to int64) ([][]*dtqtype.MinuteStats, error) {
	pipe := r.c.Pipeline()
	cmds := make([][]*redis.MapStringStringCmd, len(queues))
	for i, q := range queues {
		for m := from; m <= to; m++ {
			cmds[i] = append(cmds[i], pipe.HGetAll(ctx, r.keys.Stats(q, m)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([][]*dtqtype.MinuteStats, len(queues))
	for i := range queues {
		out[i] = make([]*dtqtype.MinuteStats, len(cmds[i]))
		for j, c := range cmds[i] {
			out[i][j] = decodeMinute(from+int64(j), c.Val())
		}
	}
	return out, nil
}

// decodeMinute turns one per-minute stats hash (fields succeeded, failed,
// retried, dead_lettered, cancelled, started, wait_ms_sum, run_ms_sum and
// the power-of-two latency buckets wait_b<k>, run_b<k>) into MinuteStats.
func decodeMinute(minute int64, h map[string]string) *dtqtype.MinuteStats {
	m := &dtqtype.MinuteStats{Minute: dtqtype.MillisTime(minute * 60000),
		WaitBuckets: map[string]int64{}, RunBuckets: map[string]int64{}}
	for f, v := range h {
		n := atoi64(v)
		switch f {
		case "succeeded":
			m.Succeeded = n
		case "failed":
			m.Failed = n
		case "dead_lettered":
			m.DeadLettered = n
		case "retried":
			m.Retried = n
		case "cancelled":
			m.Cancelled = n
		case "started":
			m.Started = n
		case "wait_ms_sum":
			m.WaitMSSum = n
		case "run_ms_sum":
			m.RunMSSum = n
		default:
			if b, ok := strings.CutPrefix(f, "wait_b"); ok {
				m.WaitBuckets[bucketLabel(b)] += n
			} else if b, ok := strings.CutPrefix(f, "run_b"); ok {
				m.RunBuckets[bucketLabel(b)] += n
			}
		}
	}
	return m
}

// bucketLabel turns a power-of-two bucket index into its upper bound label:
// bucket 0 holds 0ms, bucket k holds [2^(k-1), 2^k) ms.
func bucketLabel(b string) string {
	k, err := strconv.Atoi(b)
	if err != nil || k < 0 || k > 62 {
		return "other"
	}
	if k == 0 {
		return "lt_1ms"
	}
	return "lt_" + strconv.FormatInt(int64(1)<<k, 10) + "ms"
}
