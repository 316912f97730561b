package dtq

import (
	"context"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// throughputWindow is how many recent minutes QueueInfo summarizes.
const throughputWindow = 5

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
	workers, err := i.rdb.Workers(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	return i.queueInfo(ctx, queue, workers)
}

// queueInfo reads queue's state, counting the live workers among workers
// that serve it.
func (i *Inspector) queueInfo(ctx context.Context, q string, workers []*dtqtype.WorkerInfo) (*dtqtype.QueueInfo, error) {
	qi, err := i.partitionedInfo(ctx, q)
	if err != nil {
		return nil, err
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
	return qi, nil
}

// ListWorkers returns a page of the workers that heartbeated in the last
// 24 hours, in worker id order, so that workers beating meanwhile do not
// move between pages; Live is false once a worker missed three heartbeats.
// A bad Limit is a *ValidationError, a bad cursor ErrInvalidCursor.
func (i *Inspector) ListWorkers(ctx context.Context, params *WorkerListParams) (*dtqtype.ListResult[*dtqtype.WorkerInfo], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 100, ""); err != nil {
		return nil, err
	}
	return i.rdb.ListWorkers(ctx, time.Now(), &p)
}

// GetWorker returns one worker, or ErrWorkerNotFound.
func (i *Inspector) GetWorker(ctx context.Context, id string) (*dtqtype.WorkerInfo, error) {
	w, err := i.rdb.GetWorker(ctx, id, time.Now())
	if err != nil {
		return nil, mapNotFound(err, ErrWorkerNotFound)
	}
	return w, nil
}

// ListDLQ returns a page of dead-letter entries, newest first, with
// payload and last error. A filtered page may be short, even empty, while
// more remain. A bad filter or Limit is a *ValidationError, a bad cursor
// ErrInvalidCursor.
func (i *Inspector) ListDLQ(ctx context.Context, params *DLQListParams) (*dtqtype.ListResult[*dtqtype.DLQEntry], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 50, p.Queue); err != nil {
		return nil, err
	}
	return i.rdb.ListDLQ(ctx, &p)
}

// GetDLQEntry returns one dead-letter entry, or ErrDLQEntryNotFound.
func (i *Inspector) GetDLQEntry(ctx context.Context, id string) (*dtqtype.DLQEntry, error) {
	e, err := i.rdb.GetDLQEntry(ctx, id)
	if err != nil {
		return nil, mapNotFound(err, ErrDLQEntryNotFound)
	}
	return e, nil
}

// ListAudit returns a page of audit entries, newest first. A bad Limit is
// a *ValidationError, a bad cursor ErrInvalidCursor.
func (i *Inspector) ListAudit(ctx context.Context, params *AuditListParams) (*dtqtype.ListResult[*dtqtype.AuditEntry], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 50, ""); err != nil {
		return nil, err
	}
	return i.rdb.ListAudit(ctx, &p)
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
