package rdb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// QueueStats is a queue's state, computed from counters and structure sizes
// (never by scanning tasks).
type QueueStats struct {
	Name      string
	Depth     int64           // live tasks (the depth gate's counter)
	Ready     [NumBands]int64 // queued and undelivered, per band p0..p9
	Running   int64           // delivered and leased
	Pending   int64           // delivered, unacked stream entries
	Scheduled int64           // pending (delayed) and retrying
	Paused    bool
	DLQ       int64
	Minutes   []*dtqtype.MinuteStats // the last few minutes, oldest first
	Limits    Limits                 // flow-control limits; zero when none are set
	// Retained counts the finished tasks whose retention runs, by status
	// (statuses with none left out).
	Retained map[string]int64
}

// QueueExists reports whether queue is in the registry.
func (r *RDB) QueueExists(ctx context.Context, queue string) (bool, error) {
	return r.c.HExists(ctx, r.keys.Queues(), queue).Result()
}

// QueuesExist reports, for each of queues, whether it is in the registry
// (one HMGET).
func (r *RDB) QueuesExist(ctx context.Context, queues []string) ([]bool, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	vals, err := r.c.HMGet(ctx, r.keys.Queues(), queues...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v != nil
	}
	return out, nil
}

// GetQueueStats reads one queue's stats with one pipeline, including the
// per-minute counters of the last minutes (up to now).
func (r *RDB) GetQueueStats(ctx context.Context, queue string, now time.Time, minutes int) (*QueueStats, error) {
	k := r.keys
	pipe := r.c.Pipeline()
	xlen := make([]*redis.IntCmd, NumBands)
	xpend := make([]*redis.XPendingCmd, NumBands)
	for b := 0; b < NumBands; b++ {
		xlen[b] = pipe.XLen(ctx, k.Stream(queue, b))
		xpend[b] = pipe.XPending(ctx, k.Stream(queue, b), Group)
	}
	depth := pipe.Get(ctx, k.Depth(queue))
	lease := pipe.ZCard(ctx, k.Lease(queue))
	sched := pipe.ZCard(ctx, k.Schedule(queue))
	paused := pipe.Exists(ctx, k.Paused(queue))
	dlq := pipe.ZCard(ctx, k.DLQ(queue))
	limits := pipe.HGetAll(ctx, k.Limits(queue))
	retained := pipe.HGetAll(ctx, k.Retained(queue))
	first := minuteOf(now) - int64(minutes) + 1
	mins := make([]*redis.MapStringStringCmd, minutes)
	for i := range mins {
		mins[i] = pipe.HGetAll(ctx, k.Stats(queue, first+int64(i)))
	}
	_, _ = pipe.Exec(ctx) // per-command errors are checked below
	qs := &QueueStats{Name: queue}
	// Claims trim what they deliver, so a band stream holds exactly its
	// undelivered entries.
	for b := 0; b < NumBands; b++ {
		if p, err := xpend[b].Result(); err == nil {
			qs.Pending += p.Count
		}
		qs.Ready[b] = xlen[b].Val()
	}
	if err := depth.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	qs.Depth, _ = strconv.ParseInt(depth.Val(), 10, 64)
	qs.Running, qs.Scheduled, qs.Paused, qs.DLQ = lease.Val(), sched.Val(), paused.Val() == 1, dlq.Val()
	if err := lease.Err(); err != nil {
		return nil, err
	}
	qs.Limits = parseLimits(limits.Val())
	qs.Retained = retainedCounts(retained.Val(), now)
	for i, m := range mins {
		qs.Minutes = append(qs.Minutes, decodeMinute(first+int64(i), m.Val()))
	}
	return qs, nil
}

// ListDLQ returns DLQ entries newest first across the selected queues, and
// the cursor of the next page ("" at the end). A filtered page may be short.
func (r *RDB) ListDLQ(ctx context.Context, f dtqtype.DLQFilter) ([]*dtqtype.DLQEntry, string, error) {
	queues := []string{f.Queue}
	if f.Queue == "" {
		var err error
		if queues, err = r.Queues(ctx); err != nil {
			return nil, "", err
		}
	}
	offsets := map[string]int64{}
	if f.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		if err != nil || json.Unmarshal(raw, &offsets) != nil {
			return nil, "", ErrBadCursor
		}
	}
	scan := int64(f.Limit)
	if f.Type != "" || f.ErrorClass != "" {
		scan = maxExamined
	}
	type cand struct {
		queue, id string
		at        float64
		rank      int64 // position in its queue's index
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(queues))
	for i, q := range queues {
		off := offsets[q]
		if off < 0 {
			continue
		}
		cmds[i] = pipe.ZRevRangeWithScores(ctx, r.keys.DLQ(q), off, off+scan-1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", err
	}
	var all []cand
	for i, q := range queues {
		if cmds[i] == nil {
			continue
		}
		for j, z := range cmds[i].Val() {
			all = append(all, cand{queue: q, id: z.Member.(string), at: z.Score, rank: offsets[q] + int64(j)})
		}
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].at != all[b].at {
			return all[a].at > all[b].at
		}
		if all[a].queue != all[b].queue {
			return all[a].queue < all[b].queue
		}
		return all[a].id > all[b].id
	})
	// Read the hashes and keep the matching ones until the page is full.
	pipe = r.c.Pipeline()
	hs := make([]*redis.MapStringStringCmd, len(all))
	for i, c := range all {
		hs[i] = pipe.HGetAll(ctx, r.keys.Task(c.queue, c.id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", err
	}
	var out []*dtqtype.DLQEntry
	consumed := len(all)
	for i, c := range all {
		h := hs[i].Val()
		if len(h) == 0 || (f.Type != "" && h["type"] != f.Type) || (f.ErrorClass != "" && h["error_class"] != f.ErrorClass) {
			continue
		}
		out = append(out, &dtqtype.DLQEntry{TaskInfo: decodeTask(c.queue, c.id, h, nil), FailedAt: dtqtype.MillisTime(int64(c.at))})
		if len(out) == f.Limit {
			consumed = i + 1
			break
		}
	}
	// Advance each queue past what this page consumed.
	next := map[string]int64{}
	more := false
	for _, q := range queues {
		next[q] = offsets[q]
	}
	for _, c := range all[:consumed] {
		next[c.queue] = c.rank + 1
	}
	for i, q := range queues {
		if next[q] < 0 {
			continue
		}
		got := int64(0)
		if cmds[i] != nil {
			got = int64(len(cmds[i].Val()))
		}
		if got < scan && next[q] == offsets[q]+got {
			next[q] = -1 // this queue is exhausted
		} else {
			more = true
		}
	}
	if !more {
		return out, "", nil
	}
	raw, _ := json.Marshal(next)
	return out, base64.RawURLEncoding.EncodeToString(raw), nil
}

// ErrBadCursor means a cursor was not one this API returned.
var ErrBadCursor = errors.New("bad cursor")

// GetDLQEntry returns one DLQ entry, or ErrNotFound when the task is not in
// its queue's DLQ index.
func (r *RDB) GetDLQEntry(ctx context.Context, id string) (*dtqtype.DLQEntry, error) {
	t, err := r.GetTask(ctx, id)
	if err != nil {
		return nil, err
	}
	score, err := r.c.ZScore(ctx, r.keys.DLQ(t.Queue), id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &dtqtype.DLQEntry{TaskInfo: t, FailedAt: dtqtype.MillisTime(int64(score))}, nil
}

// ListAudit returns audit entries newest first, starting before cursor (an
// entry id; "" = newest).
func (r *RDB) ListAudit(ctx context.Context, limit int, cursor string) ([]*dtqtype.AuditEntry, string, error) {
	start := "+"
	if cursor != "" {
		ms, seq, ok := strings.Cut(cursor, "-")
		_, e1 := strconv.ParseUint(ms, 10, 64)
		_, e2 := strconv.ParseUint(seq, 10, 64)
		if !ok || e1 != nil || e2 != nil {
			return nil, "", ErrBadCursor
		}
		if cursor == "0-0" {
			return nil, "", nil // nothing is older than the first possible id
		}
		start = "(" + cursor
	}
	msgs, err := r.c.XRevRangeN(ctx, r.keys.Audit(), start, "-", int64(limit+1)).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return nil, "", ErrBadCursor
		}
		return nil, "", err
	}
	next := ""
	if len(msgs) > limit {
		msgs = msgs[:limit]
		next = msgs[limit-1].ID
	}
	out := make([]*dtqtype.AuditEntry, len(msgs))
	for i, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		out[i] = &dtqtype.AuditEntry{ID: m.ID, TS: dtqtype.MillisTime(atoi64(str("ts"))), Actor: str("actor"),
			Role: str("role"), Action: str("action"), Target: str("target"), RequestID: str("request_id"), Detail: str("detail")}
	}
	return out, next, nil
}
