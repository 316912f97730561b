package rdb

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
)

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

// bandReady is the ready tasks of band b: the entries its stream holds
// (claims trim what they deliver, so those are exactly its undelivered
// ones) and, with key queues, the tasks waiting in its key queues, which
// the fair state hash fs counts ("n<band>").
func bandReady(streamLen int64, fs map[string]string, b int) int64 {
	inKeys, _ := strconv.ParseInt(fs["n"+strconv.Itoa(b)], 10, 64)
	return streamLen + max(0, inKeys)
}

// QueueInfo reads one queue's state with one pipeline, from counters and
// structure sizes (never by scanning tasks), its throughput summing the
// per-minute counters of the last minutes up to now. LiveWorkers and
// Unserved, which need the worker records, are left to the caller.
func (r *RDB) QueueInfo(ctx context.Context, queue string, now time.Time, minutes int) (*dtqtype.QueueInfo, error) {
	k := r.keys
	pipe := r.c.Pipeline()
	xlen := make([]*redis.IntCmd, NumBands)
	xpend := make([]*redis.XPendingCmd, NumBands)
	for b := range NumBands {
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
	fair := pipe.HGetAll(ctx, k.FairState(queue))
	top := pipe.ZRevRangeWithScores(ctx, k.FairKeys(queue), 0, 9)
	retained := pipe.HGetAll(ctx, k.Retained(queue))
	dedups := pipe.HGetAll(ctx, k.DedupCounts(queue))
	first := minuteOf(now) - int64(minutes) + 1
	mins := make([]*redis.MapStringStringCmd, minutes)
	for i := range mins {
		mins[i] = pipe.HGetAll(ctx, k.Stats(queue, first+int64(i)))
	}
	_, _ = pipe.Exec(ctx) // per-command errors are checked below
	qi := &dtqtype.QueueInfo{Name: queue, Ready: make(map[string]int64, NumBands)}
	// Claims trim what they deliver, so a band stream holds exactly its
	// undelivered entries; with key queues, a band's ready tasks are also
	// those waiting in its key queues.
	fs := fair.Val()
	for b := NumBands - 1; b >= 0; b-- {
		if p, err := xpend[b].Result(); err == nil {
			qi.Pending += p.Count
		}
		n := bandReady(xlen[b].Val(), fs, b)
		qi.Ready["p"+strconv.Itoa(b)] = n
		qi.ReadyTotal += n
	}
	if err := depth.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	qi.Depth, _ = strconv.ParseInt(depth.Val(), 10, 64)
	qi.Running, qi.Scheduled, qi.Paused, qi.DLQ = lease.Val(), sched.Val(), paused.Val() == 1, dlq.Val()
	qi.Waiting = waiting.Val()
	if err := lease.Err(); err != nil {
		return nil, err
	}
	qi.Limits = parseLimits(limits.Val())
	qi.TopKeys = keyBacklogs(top.Val())
	if len(qi.TopKeys) == 0 {
		qi.TopKeys = nil
	}
	qi.Retained = retainedCounts(retained.Val(), now)
	for mode, v := range dedups.Val() {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			if qi.Deduplicated == nil {
				qi.Deduplicated = map[string]int64{}
			}
			qi.Deduplicated[mode] = n
		}
	}
	tp := &qi.Throughput
	tp.WindowMinutes = minutes
	for i, m := range mins {
		ms := decodeMinute(first+int64(i), m.Val())
		tp.Succeeded += ms.Succeeded
		tp.Failed += ms.Failed + ms.DeadLettered
		tp.Retried += ms.Retried
	}
	tp.PerMinute = float64(tp.Succeeded+tp.Failed) / float64(minutes)
	return qi, nil
}

// dlqPos is a position in the DLQ listing's order: failed_at descending,
// then queue name ascending, then task id descending (how ZREVRANGE orders
// an index's ties). A page's cursor is the position of the last entry it
// consumed, whatever the number of queues.
type dlqPos struct {
	at    int64 // failed_at, epoch ms (the index's score)
	queue string
	id    string
}

func (p dlqPos) cursor() string {
	return cursor.Encode(cursor.DLQ, strconv.FormatInt(p.at, 10), p.queue, p.id)
}

func parseDLQCursor(c string) (dlqPos, error) {
	r := cursor.Read(c, cursor.DLQ)
	p := dlqPos{at: r.Int(0, maxScoreMillis), queue: r.String(ValidStorageName), id: r.String(validTaskID)}
	return p, r.Err()
}

// validTaskID reports whether id has the form of a task id.
func validTaskID(id string) bool {
	_, ok := ParseTaskID(id)
	return ok
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
	for i := range len(q) {
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

// ListDLQ returns a page of DLQ entries newest first across the selected
// queues (p.Limit is the page size; the caller checks it). A filtered page
// may be short. The cursor is a position, so its size does not grow with
// the number of queues; entries removed between pages shift nothing. A bad
// cursor is cursor.ErrInvalid.
func (r *RDB) ListDLQ(ctx context.Context, p *dtqtype.DLQListParams) (*dtqtype.ListResult[*dtqtype.DLQEntry], error) {
	var from *dlqPos
	if p.Cursor != "" {
		pos, err := parseDLQCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		from = &pos
	}
	queues, err := r.storageNames(ctx, p.Queue)
	if err != nil {
		return nil, err
	}
	scan := int64(p.Limit)
	if p.Type != "" || p.ErrorClass != "" {
		scan = maxExamined
	}
	// The cursor's own queue resumes just past its entry, found by rank;
	// if that entry has left the index, past its millisecond.
	var rank *redis.IntCmd
	if from != nil && slices.Contains(queues, from.queue) {
		rank = r.c.ZRevRank(ctx, r.keys.DLQ(from.queue), from.id)
		if err := rank.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
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
			upTo := strconv.FormatInt(from.at, 10)
			if q <= from.queue {
				upTo = "(" + upTo
			}
			cmds[i] = pipe.ZRevRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Max: upTo, Min: "-inf", Count: scan})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var all []dlqPos
	var bound *dlqPos // the earliest last entry of a queue that may hold more
	for i, q := range queues {
		zs := cmds[i].Val()
		for _, z := range zs {
			all = append(all, dlqPos{at: int64(z.Score), queue: q, id: zMember(z)})
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
		return nil, err
	}
	var out []*dtqtype.DLQEntry
	consumed := len(all)
	for i, c := range all {
		h := hs[i].Val()
		if len(h) == 0 || (p.Type != "" && h["type"] != p.Type) || (p.ErrorClass != "" && h["error_class"] != p.ErrorClass) {
			continue
		}
		out = append(out, &dtqtype.DLQEntry{TaskInfo: decodeTask(c.queue, c.id, h, nil), FailedAt: dtqtype.MillisTime(c.at)})
		if len(out) == p.Limit {
			consumed = i + 1
			break
		}
	}
	res := &dtqtype.ListResult[*dtqtype.DLQEntry]{Items: out}
	switch {
	case consumed < len(all):
		res.NextCursor = all[consumed-1].cursor()
	case bound != nil: // all ends with bound, and a queue may hold more
		res.NextCursor = bound.cursor()
	}
	return res, nil
}

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

// ListAudit returns a page of audit entries newest first (p.Limit is the
// page size; the caller checks it). The cursor is the id of the page's last
// entry; a bad one is cursor.ErrInvalid.
func (r *RDB) ListAudit(ctx context.Context, p *dtqtype.AuditListParams) (*dtqtype.ListResult[*dtqtype.AuditEntry], error) {
	start := "+"
	if p.Cursor != "" {
		c := cursor.Read(p.Cursor, cursor.Audit)
		// Entries are added with ids from Redis's clock: never 0-0.
		ms, seq := c.Int(1, maxScoreMillis), c.Int(0, math.MaxInt64)
		if err := c.Err(); err != nil {
			return nil, err
		}
		start = "(" + strconv.FormatInt(ms, 10) + "-" + strconv.FormatInt(seq, 10)
	}
	msgs, err := r.c.XRevRangeN(ctx, r.keys.Audit(), start, "-", int64(p.Limit+1)).Result()
	if err != nil {
		return nil, err
	}
	res := &dtqtype.ListResult[*dtqtype.AuditEntry]{}
	if len(msgs) > p.Limit {
		msgs = msgs[:p.Limit]
		ms, seq, _ := strings.Cut(msgs[p.Limit-1].ID, "-")
		res.NextCursor = cursor.Encode(cursor.Audit, ms, seq)
	}
	res.Items = make([]*dtqtype.AuditEntry, len(msgs))
	for i, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		res.Items[i] = &dtqtype.AuditEntry{ID: m.ID, TS: dtqtype.MillisTime(atoi64(str("ts"))), Actor: str("actor"),
			Role: str("role"), Action: str("action"), Target: str("target"), RequestID: str("request_id"), Detail: str("detail")}
	}
	return res, nil
}
