package dtq

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// Queue list bounds: reading a queue's full state costs about thirty Redis
// commands, so a page holds at most MaxQueuePage queues.
const (
	DefaultQueuePage = 100
	MaxQueuePage     = 1000
)

// QueueListOptions select one page of ListQueuePage.
type QueueListOptions struct {
	// Limit is the page size, 1..MaxQueuePage. Default DefaultQueuePage.
	Limit int
	// Cursor continues after a previous page ("" = the first page).
	Cursor string
	// Only, when not nil, restricts the list to these queues (those in the
	// registry); a key scoped to some queues lists just those.
	Only []string
}

// queueCursorPrefix versions the queue list cursor, which carries the last
// name of the page before.
const queueCursorPrefix = "q1:"

func encodeQueueCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(queueCursorPrefix + last))
}

func decodeQueueCursor(c string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", ErrInvalidCursor
	}
	last, ok := strings.CutPrefix(string(raw), queueCursorPrefix)
	if !ok || !ValidQueueName(last) {
		return "", ErrInvalidCursor
	}
	return last, nil
}

// ListQueuePage returns one page of queues by name and the cursor of the
// next page ("" at the end). Paging is by name, so a queue created or
// deleted meanwhile is seen or missed by where its name falls, never twice.
// A bad Limit is a *ValidationError, a bad cursor ErrInvalidCursor.
func (i *Inspector) ListQueuePage(ctx context.Context, o QueueListOptions) ([]*dtqtype.QueueInfo, string, error) {
	if o.Limit == 0 {
		o.Limit = DefaultQueuePage
	}
	if o.Limit < 1 || o.Limit > MaxQueuePage {
		return nil, "", invalid("limit", "must be between 1 and %d", MaxQueuePage)
	}
	after := ""
	if o.Cursor != "" {
		var err error
		if after, err = decodeQueueCursor(o.Cursor); err != nil {
			return nil, "", err
		}
	}
	names, err := i.queueNames(ctx, o.Only)
	if err != nil {
		return nil, "", err
	}
	start, found := slices.BinarySearch(names, after)
	if found {
		start++
	}
	names = names[start:]
	next := ""
	if len(names) > o.Limit {
		names = names[:o.Limit]
		next = encodeQueueCursor(names[len(names)-1])
	}
	items, err := i.QueueInfos(ctx, names)
	if err != nil {
		return nil, "", err
	}
	return items, next, nil
}

// QueueNames returns every registered queue name, sorted. One read of the
// registry, whatever the number of queues.
func (i *Inspector) QueueNames(ctx context.Context) ([]string, error) {
	return i.queueNames(ctx, nil)
}

// queueNames is the sorted registry, restricted to only when not nil.
func (i *Inspector) queueNames(ctx context.Context, only []string) ([]string, error) {
	names, err := i.rdb.Queues(ctx)
	if err != nil {
		return nil, err
	}
	if only != nil {
		names = slices.DeleteFunc(names, func(q string) bool { return !slices.Contains(only, q) })
	}
	return names, nil
}

// QueueInfos returns the full state of each named queue, in the order
// given; a name not in the registry reads as an empty queue.
func (i *Inspector) QueueInfos(ctx context.Context, names []string) ([]*dtqtype.QueueInfo, error) {
	out := make([]*dtqtype.QueueInfo, 0, len(names))
	if len(names) == 0 {
		return out, nil
	}
	workers, err := i.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range names {
		qi, err := i.queueInfo(ctx, q, workers)
		if err != nil {
			return nil, err
		}
		out = append(out, qi)
	}
	return out, nil
}

// QueueSizes returns the cheap sizes (depth, running, scheduled, dead
// letters, paused) of each named queue, in the order given, with one Redis
// pipeline: five commands a queue, no stream reads.
func (i *Inspector) QueueSizes(ctx context.Context, names []string) ([]dtqtype.QueueSize, error) {
	for _, q := range names {
		if !ValidQueueName(q) {
			return nil, invalid("queue", "%q must match ^[a-z0-9][a-z0-9_-]{0,63}$", q)
		}
	}
	return i.rdb.QueueSizes(ctx, names, time.Now())
}

// QueueTotals sums QueueSizes over the registered queues (restricted to
// only when not nil).
func (i *Inspector) QueueTotals(ctx context.Context, only []string) (dtqtype.QueueTotals, error) {
	var t dtqtype.QueueTotals
	names, err := i.queueNames(ctx, only)
	if err != nil {
		return t, err
	}
	ss, err := i.QueueSizes(ctx, names)
	if err != nil {
		return t, err
	}
	for _, s := range ss {
		t.Add(s)
	}
	return t, nil
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
