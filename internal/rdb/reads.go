package rdb

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
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
	Waiting   int64           // workflow nodes not yet released
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
	waiting := pipe.ZCard(ctx, k.Waiting(queue))
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
	qs.Waiting = waiting.Val()
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

// dlqCursorPrefix versions the DLQ list cursor: the position (failed_at,
// queue, task id) of the last entry a page consumed, whatever the number of
// queues. Earlier cursors (a JSON offset per queue) are refused.
const dlqCursorPrefix = "d2:"

// maxDLQCursorLen bounds an encoded DLQ cursor: a position is under 200
// bytes.
const maxDLQCursorLen = 256

// dlqPos is a position in the DLQ listing's order: failed_at descending,
// then queue name ascending, then task id descending (how ZREVRANGE orders
// an index's ties).
type dlqPos struct {
	at    int64 // failed_at, epoch ms (the index's score)
	queue string
	id    string
}

func (p dlqPos) cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte(dlqCursorPrefix + strconv.FormatInt(p.at, 10) + ":" + p.queue + ":" + p.id))
}

func parseDLQCursor(c string) (dlqPos, error) {
	if len(c) > maxDLQCursorLen {
		return dlqPos{}, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return dlqPos{}, ErrBadCursor
	}
	rest, ok := strings.CutPrefix(string(raw), dlqCursorPrefix)
	parts := strings.Split(rest, ":")
	if !ok || len(parts) != 3 {
		return dlqPos{}, ErrBadCursor
	}
	at, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || at < 0 || at > maxScoreMillis || !validQueueName(parts[1]) {
		return dlqPos{}, ErrBadCursor
	}
	if _, ok := ParseTaskID(parts[2]); !ok {
		return dlqPos{}, ErrBadCursor
	}
	return dlqPos{at: at, queue: parts[1], id: parts[2]}, nil
}

// maxScoreMillis bounds a cursor's failed_at: well past any real time and
// exact as a Redis score (below 2^53).
const maxScoreMillis = 1 << 52

// validQueueName mirrors dtq.ValidQueueName (^[a-z0-9][a-z0-9_-]{0,63}$),
// which this package cannot import.
func validQueueName(q string) bool {
	if q == "" || len(q) > 64 {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// after reports whether o comes after p in the listing's order.
func (p dlqPos) after(o dlqPos) bool {
	if o.at != p.at {
		return o.at < p.at
	}
	if o.queue != p.queue {
		return o.queue > p.queue
	}
	return o.id < p.id
}

// ListDLQ returns DLQ entries newest first across the selected queues, and
// the cursor of the next page ("" at the end). A filtered page may be short.
// The cursor is a position, so its size does not grow with the number of
// queues; entries removed between pages shift nothing.
func (r *RDB) ListDLQ(ctx context.Context, f dtqtype.DLQFilter) ([]*dtqtype.DLQEntry, string, error) {
	var from *dlqPos
	if f.Cursor != "" {
		p, err := parseDLQCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		from = &p
	}
	queues := []string{f.Queue}
	if f.Queue == "" {
		var err error
		if queues, err = r.Queues(ctx); err != nil {
			return nil, "", err
		}
	}
	scan := int64(f.Limit)
	if f.Type != "" || f.ErrorClass != "" {
		scan = maxExamined
	}
	// The cursor's own queue resumes just past its entry, found by rank;
	// if that entry has left the index, past its millisecond.
	var rank *redis.IntCmd
	if from != nil && slices.Contains(queues, from.queue) {
		rank = r.c.ZRevRank(ctx, r.keys.DLQ(from.queue), from.id)
		if err := rank.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, "", err
		}
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(queues))
	for i, q := range queues {
		k := r.keys.DLQ(q)
		switch {
		case from == nil:
			cmds[i] = pipe.ZRevRangeWithScores(ctx, k, 0, scan-1)
		case q == from.queue && rank.Err() == nil:
			n := rank.Val()
			cmds[i] = pipe.ZRevRangeWithScores(ctx, k, n+1, n+scan)
		default:
			// Ties at the cursor's millisecond come after it only in
			// queues sorting after its queue.
			max := strconv.FormatInt(from.at, 10)
			if q <= from.queue {
				max = "(" + max
			}
			cmds[i] = pipe.ZRevRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Max: max, Min: "-inf", Count: scan})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", err
	}
	var all []dlqPos
	var bound *dlqPos // the earliest last entry of a queue that may hold more
	for i, q := range queues {
		zs := cmds[i].Val()
		for _, z := range zs {
			all = append(all, dlqPos{at: int64(z.Score), queue: q, id: z.Member.(string)})
		}
		if int64(len(zs)) == scan {
			last := all[len(all)-1]
			if bound == nil || last.after(*bound) {
				bound = &last
			}
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].after(all[b]) })
	// Past bound, a queue's unread entries could come first: stop there.
	if bound != nil {
		n := sort.Search(len(all), func(i int) bool { return bound.after(all[i]) })
		all = all[:n]
	}
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
		out = append(out, &dtqtype.DLQEntry{TaskInfo: decodeTask(c.queue, c.id, h, nil), FailedAt: dtqtype.MillisTime(c.at)})
		if len(out) == f.Limit {
			consumed = i + 1
			break
		}
	}
	switch {
	case consumed < len(all):
		return out, all[consumed-1].cursor(), nil
	case bound != nil: // all ends with bound, and a queue may hold more
		return out, bound.cursor(), nil
	}
	return out, "", nil
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
