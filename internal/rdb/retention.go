package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// RetainedStatuses are the statuses a finished task is retained under, in
// the order they are shown.
var RetainedStatuses = []string{"succeeded", "failed", "dead_lettered", "cancelled", "expired"}

// retainedCounts sums a retained counts hash (field <status>:<bucket end,
// epoch s>) by status, counting the buckets that end after now; statuses
// with none are left out. A task is counted until the minute (or hour, for
// retentions over 6 h) its retention ends in has passed.
func retainedCounts(h map[string]string, now time.Time) map[string]int64 {
	out := map[string]int64{}
	nowS := now.Unix()
	for f, v := range h {
		status, end, ok := strings.Cut(f, ":")
		if !ok || !slices.Contains(RetainedStatuses, status) {
			continue
		}
		if e, err := strconv.ParseInt(end, 10, 64); err == nil && e > nowS {
			if n := atoi64(v); n > 0 {
				out[status] += n
			}
		}
	}
	return out
}

// TidyBatch is how many listing-index ids one tidy call examines.
const TidyBatch = 1000

// TidyResult is what one Tidy call did.
type TidyResult struct {
	Examined, Dropped, Pruned int
	// Wrapped means the walk reached the end of the listing index: the next
	// call starts over, and nothing is left to do for a while.
	Wrapped bool
}

// Tidy runs one step of queue's tidy pass (see tidy.lua): ids of tasks
// whose retention ended leave the listing index, ended retained-count
// buckets are pruned. Only ids of tasks created before createdBefore are
// looked at: the caller passes now less the shortest retention, since a
// task is kept at least that long and younger ids need no lookup.
func (r *RDB) Tidy(ctx context.Context, queue string, now, createdBefore time.Time) (TidyResult, error) {
	k := r.keys
	num, err := r.queueNumber(ctx, queue, false)
	if errors.Is(err, ErrQueueNotRegistered) {
		return TidyResult{Wrapped: true}, nil // deleted, or never used: nothing to tidy
	}
	if err != nil {
		return TidyResult{}, err
	}
	v, err := r.callTidy(ctx, &tidyKeys{Recent: k.Recent(queue), Cursor: k.Tidy(queue), Retained: k.Retained(queue)},
		&tidyArgs{
			Now: now.UnixMilli(), TaskPrefix: k.TaskPrefix(queue), Batch: TidyBatch, Suffix: idSuffix(num),
			End: fmt.Sprintf("%012x", min(max(createdBefore.UnixMilli(), 0), 1<<48-1)),
		})
	if err != nil {
		return TidyResult{}, err
	}
	return TidyResult{Examined: int(v.Examined), Dropped: int(v.Dropped), Pruned: int(v.Pruned), Wrapped: v.Wrapped == 1}, nil
}

// Memory reads used_memory and maxmemory from INFO memory (every master's,
// on Cluster). ok is false when the server does not report them (the
// in-process dev Redis).
func (r *RDB) Memory(ctx context.Context) (m dtqtype.RedisMemory, ok bool, err error) {
	read := func(ctx context.Context, c redis.UniversalClient) (dtqtype.RedisMemory, bool, error) {
		info, err := readInfo(ctx, c, "memory")
		if err != nil {
			return dtqtype.RedisMemory{}, false, err
		}
		used := infoField(info, "used_memory")
		if used == "" {
			return dtqtype.RedisMemory{}, false, nil
		}
		return dtqtype.RedisMemory{UsedBytes: atoi64(used), MaxBytes: atoi64(infoField(info, "maxmemory"))}, true, nil
	}
	var mu sync.Mutex
	ok = true
	unlimited := false // a master without maxmemory: the sum has no limit
	err = r.eachMaster(ctx, func(ctx context.Context, c redis.UniversalClient) error {
		one, has, err := read(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		m.UsedBytes += one.UsedBytes
		m.MaxBytes += one.MaxBytes
		unlimited = unlimited || one.MaxBytes == 0
		ok = ok && has
		return err
	})
	if unlimited {
		m.MaxBytes = 0
	}
	return m, ok && err == nil, err
}
