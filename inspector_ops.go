package dtq

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// throughputWindow is how many recent minutes QueueInfo summarizes.
const throughputWindow = 5

// ListQueues returns every queue ever submitted to, by name. It reads every
// queue's full state, so its cost grows with the number of queues; the API
// pages with ListQueuePage instead.
func (i *Inspector) ListQueues(ctx context.Context) ([]*dtqtype.QueueInfo, error) {
	names, err := i.rdb.Queues(ctx)
	if err != nil {
		return nil, err
	}
	workers, err := i.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*dtqtype.QueueInfo, 0, len(names))
	for _, q := range names {
		qi, err := i.queueInfo(ctx, q, workers)
		if err != nil {
			return nil, err
		}
		out = append(out, qi)
	}
	return out, nil
}

// GetQueue returns one queue's state, or ErrQueueNotFound for a queue never
// submitted to.
func (i *Inspector) GetQueue(ctx context.Context, queue string) (*dtqtype.QueueInfo, error) {
	if !ValidQueueName(queue) {
		return nil, ErrQueueNotFound
	}
	ok, err := i.rdb.QueueExists(ctx, queue)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrQueueNotFound
	}
	workers, err := i.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	return i.queueInfo(ctx, queue, workers)
}

func (i *Inspector) queueInfo(ctx context.Context, q string, workers []*dtqtype.WorkerInfo) (*dtqtype.QueueInfo, error) {
	st, err := i.rdb.GetQueueStats(ctx, q, time.Now(), throughputWindow)
	if err != nil {
		return nil, err
	}
	qi := &dtqtype.QueueInfo{Name: q, Depth: st.Depth, Ready: map[string]int64{}, Running: st.Running,
		Pending: st.Pending, Scheduled: st.Scheduled, Waiting: st.Waiting, Paused: st.Paused, DLQ: st.DLQ, Retained: st.Retained}
	for b := rdb.NumBands - 1; b >= 0; b-- {
		qi.Ready["p"+strconv.Itoa(b)] = st.Ready[b]
		qi.ReadyTotal += st.Ready[b]
	}
	for _, w := range workers {
		if !w.Live {
			continue
		}
		for _, wq := range w.Queues {
			if name, _, _ := strings.Cut(wq, ":"); name == q {
				qi.LiveWorkers++
			}
		}
	}
	qi.Unserved = qi.LiveWorkers == 0
	tp := &qi.Throughput
	tp.WindowMinutes = throughputWindow
	for _, m := range st.Minutes {
		tp.Succeeded += m.Succeeded
		tp.Failed += m.Failed + m.DeadLettered
		tp.Retried += m.Retried
	}
	tp.PerMinute = float64(tp.Succeeded+tp.Failed) / throughputWindow
	if !st.Limits.IsZero() {
		qi.Limits = limitsFromRDB(st.Limits) // read in the same pipeline as the stats
	}
	return qi, nil
}

// ListWorkers returns the workers that heartbeated in the last 24 hours,
// most recent first; Live is false once a worker missed three heartbeats.
func (i *Inspector) ListWorkers(ctx context.Context) ([]*dtqtype.WorkerInfo, error) {
	return i.rdb.ListWorkers(ctx, time.Now())
}

// Bounds of ListWorkersPage's limit.
const (
	DefaultWorkersPage = 100
	MaxWorkersPage     = 1000
)

// ListWorkersPage returns up to limit (0 = DefaultWorkersPage, at most
// MaxWorkersPage) of the workers that heartbeated in the last 24 hours, in
// worker id order, from cursor ("" = the first page), and the cursor of the
// next page ("" = none). Workers beating meanwhile do not move between
// pages. A cursor this method did not return fails with ErrInvalidCursor.
func (i *Inspector) ListWorkersPage(ctx context.Context, cursor string, limit int) ([]*dtqtype.WorkerInfo, string, error) {
	if limit <= 0 {
		limit = DefaultWorkersPage
	}
	limit = min(limit, MaxWorkersPage)
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 || !utf8.Valid(b) {
			return nil, "", ErrInvalidCursor
		}
		after = string(b)
	}
	items, next, err := i.rdb.ListWorkersPage(ctx, time.Now(), after, limit)
	if err != nil || next == "" {
		return items, "", err
	}
	return items, base64.RawURLEncoding.EncodeToString([]byte(next)), nil
}

// GetWorker returns one worker, or ErrWorkerNotFound.
func (i *Inspector) GetWorker(ctx context.Context, id string) (*dtqtype.WorkerInfo, error) {
	w, err := i.rdb.GetWorker(ctx, id, time.Now())
	if err != nil {
		return nil, mapNotFound(err, ErrWorkerNotFound)
	}
	return w, nil
}

// ListDLQ returns dead-letter entries newest first with payload and last
// error, and the cursor of the next page ("" at the end). A filtered page
// may be short while more remain.
func (i *Inspector) ListDLQ(ctx context.Context, f DLQFilter) ([]*dtqtype.DLQEntry, string, error) {
	if f.Limit == 0 {
		f.Limit = 50
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, "", invalid("limit", "must be between 1 and 1000")
	}
	if f.Queue != "" && !ValidQueueName(f.Queue) {
		return nil, "", invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	es, next, err := i.rdb.ListDLQ(ctx, f)
	if errors.Is(err, rdb.ErrBadCursor) {
		return nil, "", ErrInvalidCursor
	}
	return es, next, err
}

// GetDLQEntry returns one dead-letter entry, or ErrDLQEntryNotFound.
func (i *Inspector) GetDLQEntry(ctx context.Context, id string) (*dtqtype.DLQEntry, error) {
	e, err := i.rdb.GetDLQEntry(ctx, id)
	if err != nil {
		return nil, mapNotFound(err, ErrDLQEntryNotFound)
	}
	return e, nil
}

// ListAudit returns audit entries newest first and the next page's cursor.
func (i *Inspector) ListAudit(ctx context.Context, limit int, cursor string) ([]*dtqtype.AuditEntry, string, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 1000 {
		return nil, "", invalid("limit", "must be between 1 and 1000")
	}
	es, next, err := i.rdb.ListAudit(ctx, limit, cursor)
	if errors.Is(err, rdb.ErrBadCursor) {
		return nil, "", ErrInvalidCursor
	}
	return es, next, err
}

// Stats returns per-minute counters for queue ("" = all queues summed) over
// the last window (1 minute .. 2 hours), oldest minute first. Over all
// queues it reads at most 50,000 per-minute records (queues × minutes): a
// longer window is a *ValidationError naming the longest that fits.
func (i *Inspector) Stats(ctx context.Context, queue string, window time.Duration) ([]*dtqtype.MinuteStats, error) {
	if window < time.Minute || window > 2*time.Hour {
		return nil, invalid("window", "must be between 1m and 2h")
	}
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = i.rdb.Queues(ctx); err != nil {
			return nil, err
		}
		if err := statsWindowCheck(len(queues), int(window/time.Minute)); err != nil {
			return nil, err
		}
	} else if !ValidQueueName(queue) {
		return nil, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	to := time.Now().Unix() / 60
	from := to - int64(window/time.Minute) + 1
	out := make([]*dtqtype.MinuteStats, to-from+1)
	for j := range out {
		out[j] = &dtqtype.MinuteStats{Minute: dtqtype.MillisTime((from + int64(j)) * 60000),
			WaitBuckets: map[string]int64{}, RunBuckets: map[string]int64{}}
	}
	perQueue, err := i.rdb.MinuteRange(ctx, queues, from, to)
	if err != nil {
		return nil, err
	}
	for _, ms := range perQueue {
		for j, m := range ms {
			out[j].Add(m)
		}
	}
	return out, nil
}
