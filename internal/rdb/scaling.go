package rdb

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Autoscaling reads: what a queue's desired worker count is computed from.

const (
	// ArrivalSlot is the grain of the arrival counters ingest.lua keeps in
	// each minute's stats hash (fields a0..a11).
	ArrivalSlot = 5 * time.Second
	// ArrivalSlots is how many slots a ScalingSample carries: the one now
	// falls in and the twelve before it (a minute).
	ArrivalSlots = 13
	// ServiceMinutes is how many minutes, this one included, the service
	// time of a ScalingSample sums.
	ServiceMinutes = 5
	// DueSoon is how far ahead a ScalingSample counts scheduled tasks.
	DueSoon = time.Minute
)

// ScalingSample is one queue's state as the autoscaling signal needs it,
// read at Now.
type ScalingSample struct {
	Queue string
	Now   time.Time
	// Ready counts the tasks that a worker could claim now (band streams
	// and key queues); Held those a concurrency key holds back; Running
	// those leased; DueSoon the delayed and retrying tasks due within
	// DueSoon (or overdue).
	Ready, Held, Running, DueSoon int64
	Paused                        bool
	// Arrivals counts the tasks created due now per ArrivalSlot:
	// Arrivals[0] in the slot Now falls in (so far), Arrivals[i] i slots
	// before.
	Arrivals [ArrivalSlots]int64
	// RunMSSum and Runs sum the finished attempts' run times, and count the
	// attempts, over the last ServiceMinutes minutes.
	RunMSSum, Runs int64
	// OldestReady is when the oldest entry of the band streams became
	// ready; zero when they are empty.
	OldestReady time.Time
	// LastActive is the newest minute (epoch minutes) within the lookback
	// with any counter written (a task created, claimed or finished); -1
	// when there is none.
	LastActive int64
}

// ScalingSamples reads the scaling sample of each of queues at now, with
// one pipeline: about thirty commands a queue, plus one a minute of
// lookback past ServiceMinutes (how far back LastActive looks, in minutes).
func (r *RDB) ScalingSamples(ctx context.Context, queues []string, now time.Time, lookback int) ([]ScalingSample, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	k := r.keys
	type cmds struct {
		xlen       []*redis.IntCmd
		first      []*redis.XMessageSliceCmd
		fair       *redis.MapStringStringCmd
		held       *redis.StringCmd
		lease, due *redis.IntCmd
		paused     *redis.IntCmd
		minutes    []*redis.MapStringStringCmd // this minute first
		older      []*redis.IntCmd             // EXISTS of the lookback minutes past ServiceMinutes
	}
	cur := minuteOf(now)
	pipe := r.c.Pipeline()
	cs := make([]cmds, len(queues))
	for i, q := range queues {
		c := &cs[i]
		for b := range NumBands {
			c.xlen = append(c.xlen, pipe.XLen(ctx, k.Stream(q, b)))
			c.first = append(c.first, pipe.XRangeN(ctx, k.Stream(q, b), "-", "+", 1))
		}
		c.fair = pipe.HGetAll(ctx, k.FairState(q))
		c.held = pipe.Get(ctx, k.Held(q))
		c.lease = pipe.ZCard(ctx, k.Lease(q))
		c.due = pipe.ZCount(ctx, k.Schedule(q), "-inf", strconv.FormatInt(now.Add(DueSoon).UnixMilli(), 10))
		c.paused = pipe.Exists(ctx, k.Paused(q))
		for m := range int64(ServiceMinutes) {
			c.minutes = append(c.minutes, pipe.HGetAll(ctx, k.Stats(q, cur-m)))
		}
		for m := int64(ServiceMinutes); m <= int64(lookback); m++ {
			c.older = append(c.older, pipe.Exists(ctx, k.Stats(q, cur-m)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]ScalingSample, len(queues))
	slot := now.UnixMilli() % 60000 / ArrivalSlot.Milliseconds() // the slot of the minute now falls in
	for i, q := range queues {
		c := &cs[i]
		s := ScalingSample{Queue: q, Now: now, Running: c.lease.Val(), DueSoon: c.due.Val(), Paused: c.paused.Val() == 1,
			LastActive: -1}
		s.Held, _ = strconv.ParseInt(c.held.Val(), 10, 64)
		fs := c.fair.Val()
		oldest := int64(0)
		for b := range NumBands {
			s.Ready += bandReady(c.xlen[b].Val(), fs, b)
			if es := c.first[b].Val(); len(es) > 0 {
				ms, _, _ := strings.Cut(es[0].ID, "-")
				if t, err := strconv.ParseInt(ms, 10, 64); err == nil && (oldest == 0 || t < oldest) {
					oldest = t
				}
			}
		}
		if oldest > 0 {
			s.OldestReady = time.UnixMilli(oldest)
		}
		for m, mc := range c.minutes {
			h := mc.Val()
			if len(h) > 0 && s.LastActive < 0 {
				s.LastActive = cur - int64(m)
			}
			s.RunMSSum += atoi64(h["run_ms_sum"])
			for f, v := range h {
				if strings.HasPrefix(f, "run_b") {
					s.Runs += atoi64(v)
				}
			}
			// This minute's slots up to now's, then the last minute's.
			for j := range int64(ArrivalSlots) {
				at := slot - j + 12*int64(m)
				if at >= 0 && at < 12 {
					s.Arrivals[j] += atoi64(h["a"+strconv.FormatInt(at, 10)])
				}
			}
		}
		if s.LastActive < 0 {
			for m, e := range c.older {
				if e.Val() == 1 {
					s.LastActive = cur - ServiceMinutes - int64(m)
					break
				}
			}
		}
		out[i] = s
	}
	return out, nil
}
