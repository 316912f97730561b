package dtq

import (
	"context"
	"slices"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/rdb"
)

// ListQueues returns a page of the registered queues by name, each with its
// full state. Paging is by name, so a queue created or deleted meanwhile is
// seen or missed by where its name falls, never twice. A bad Limit is a
// *ValidationError, a bad cursor ErrInvalidCursor.
func (i *Inspector) ListQueues(ctx context.Context, params *QueueListParams) (*dtqtype.ListResult[*dtqtype.QueueInfo], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 100, ""); err != nil {
		return nil, err
	}
	after := ""
	if p.Cursor != "" {
		c := cursor.Read(p.Cursor, cursor.Queues)
		if after = c.String(ValidQueueName); c.Err() != nil {
			return nil, c.Err()
		}
	}
	names, err := i.queueNames(ctx, p.Only)
	if err != nil {
		return nil, err
	}
	start, found := slices.BinarySearch(names, after)
	if found {
		start++
	}
	names = names[start:]
	res := &dtqtype.ListResult[*dtqtype.QueueInfo]{Items: make([]*dtqtype.QueueInfo, 0, min(len(names), p.Limit))}
	if len(names) > p.Limit {
		names = names[:p.Limit]
		res.NextCursor = cursor.Encode(cursor.Queues, names[len(names)-1])
	}
	if len(names) == 0 {
		return res, nil
	}
	workers, err := i.rdb.Workers(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	for _, q := range names {
		qi, err := i.queueInfo(ctx, q, workers)
		if err != nil {
			return nil, err
		}
		res.Items = append(res.Items, qi)
	}
	return res, nil
}

// QueueSizes returns the cheap sizes (depth, running, scheduled, dead
// letters, paused, retained) of every registered queue, by name,
// restricted to only when not nil, with one Redis pipeline: five commands a
// queue, no stream reads. It is not a list because its callers need every
// queue at once, which a list page's full state (about thirty commands a
// queue) makes too dear: the totals over all queues the dashboard shows,
// and the choice of the deepest queues the metrics exporter details.
func (i *Inspector) QueueSizes(ctx context.Context, only []string) ([]dtqtype.QueueSize, error) {
	names, err := i.queueNames(ctx, only)
	if err != nil {
		return nil, err
	}
	// A partitioned queue's sizes are its partitions' summed.
	var all []string
	for _, q := range names {
		parts, err := i.rdb.Partitions(ctx, q, false)
		if err != nil {
			parts = []string{q} // deleted meanwhile: read as it is
		}
		all = append(all, parts...)
	}
	sizes, err := i.rdb.QueueSizes(ctx, all, time.Now())
	if err != nil || len(all) == len(names) {
		return sizes, err
	}
	out := make([]dtqtype.QueueSize, 0, len(names))
	for _, sz := range sizes {
		if !rdb.IsPartition(sz.Name) {
			out = append(out, sz)
			continue
		}
		s := &out[len(out)-1] // a partition follows its queue's own entry
		s.Depth += sz.Depth
		s.Running += sz.Running
		s.Scheduled += sz.Scheduled
		s.Waiting += sz.Waiting
		s.DLQ += sz.DLQ
		s.Paused = s.Paused || sz.Paused
		s.Retained += sz.Retained
	}
	return out, nil
}

// queueNames is the sorted registry, restricted to only when not nil. A
// partitioned queue is its name: its partitions are not listed.
func (i *Inspector) queueNames(ctx context.Context, only []string) ([]string, error) {
	names, err := i.rdb.Queues(ctx)
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, rdb.IsPartition)
	if only == nil {
		return names, nil
	}
	keep := make(map[string]bool, len(only))
	for _, q := range only {
		keep[q] = true
	}
	return slices.DeleteFunc(names, func(q string) bool { return !keep[q] }), nil
}

// statsRecordBudget bounds the per-minute records one Stats call over every
// queue reads (queues × minutes): about 0.1 s of Redis time.
const statsRecordBudget = 50_000

// statsWindowCheck refuses a window over all n queues that would read more
// than statsRecordBudget records, naming the largest window that fits.
func statsWindowCheck(n, minutes int) error {
	if n*minutes <= statsRecordBudget {
		return nil
	}
	fit := statsRecordBudget / n
	if fit < 1 {
		return invalid("queue", "there are %d queues, too many to sum in one request; name one with ?queue=", n)
	}
	return invalid("window", "over all %d queues a window of at most %dm can be summed (%d per-minute records a request); name a queue with ?queue= or shorten the window",
		n, fit, statsRecordBudget)
}
