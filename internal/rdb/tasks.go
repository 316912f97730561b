package rdb

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
)

// ErrNotFound means the task (or its queue) does not exist.
var ErrNotFound = errors.New("not found")

// GetTask reads one task with its result. The queue comes from the id.
func (r *RDB) GetTask(ctx context.Context, id string) (*dtqtype.TaskInfo, error) {
	num, ok := ParseTaskID(id)
	if !ok {
		return nil, ErrNotFound
	}
	queue, err := r.QueueName(ctx, num)
	if err != nil {
		return nil, err
	}
	h, res, err := r.readTask(ctx, queue, id)
	if err == nil && len(h.Val()) == 0 {
		// A miss is never taken from the cache: a registry lost and rebuilt
		// may name the number's queue differently from a cached entry, and
		// a lost one is rebuilt here rather than at the next registration.
		fresh, ferr := r.queueNameFresh(ctx, num)
		if ferr != nil {
			return nil, ferr
		}
		if fresh != queue {
			queue = fresh
			h, res, err = r.readTask(ctx, queue, id)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(h.Val()) == 0 {
		return nil, ErrNotFound
	}
	if err := r.withBodies(ctx, []taskRef{{queue, id, h.Val()}}); err != nil {
		return nil, err
	}
	var result *string
	if s, err := res.Result(); err == nil {
		result = &s
	}
	return decodeTask(queue, id, h.Val(), result), nil
}

// taskRef is one task hash read by a listing.
type taskRef struct {
	queue, id string
	h         map[string]string
}

// withBodies completes the hashes of queued tasks whose payload and
// metadata ride in their band stream entry (see ingest.lua). A claim that
// took the entry meanwhile moved them into the hash in the same script, so
// a missing entry means reading the hash's fields again.
func (r *RDB) withBodies(ctx context.Context, refs []taskRef) error {
	var need []int
	for i, t := range refs {
		if _, ok := t.h["payload"]; !ok && t.h["stream_id"] != "" && t.h["priority"] != "" {
			need = append(need, i)
		}
	}
	if len(need) == 0 {
		return nil
	}
	pipe := r.c.Pipeline()
	es := make([]*redis.XMessageSliceCmd, len(need))
	for j, i := range need {
		t := refs[i]
		sid := t.h["stream_id"]
		es[j] = pipe.XRange(ctx, r.keys.StreamPrefix(t.queue)+t.h["priority"], sid, sid)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	var again []int
	for j, i := range need {
		if msgs := es[j].Val(); len(msgs) == 1 {
			setBody(refs[i].h, msgs[0].Values["p"], msgs[0].Values["m"])
		} else {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return nil
	}
	pipe = r.c.Pipeline()
	hm := make([]*redis.SliceCmd, len(again))
	for j, i := range again {
		hm[j] = pipe.HMGet(ctx, r.keys.Task(refs[i].queue, refs[i].id), "payload", "metadata")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for j, i := range again {
		v := hm[j].Val()
		setBody(refs[i].h, v[0], v[1])
	}
	return nil
}

func setBody(h map[string]string, p, m any) {
	if s, ok := p.(string); ok {
		h["payload"] = s
	}
	if s, ok := m.(string); ok {
		h["metadata"] = s
	}
}

// TaskStatus reads only the status of a task ("" when it does not exist).
func (r *RDB) TaskStatus(ctx context.Context, queue, id string) (dtqtype.Status, error) {
	s, err := r.c.HGet(ctx, r.keys.Task(queue, id), "status").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return dtqtype.Status(s), err
}

// maxExamined bounds how many index entries one filtered page looks at, so a
// rare filter answers a short page quickly instead of scanning everything.
const maxExamined = 1000

// ListTasks returns a page of tasks newest first (f.Limit is the page
// size; the caller checks it). A filtered page may be shorter than Limit
// while more remain. The cursor is the id of the last task looked at; a bad
// one is cursor.ErrInvalid.
func (r *RDB) ListTasks(ctx context.Context, f *dtqtype.TaskListParams) (*dtqtype.ListResult[*dtqtype.TaskInfo], error) {
	after := ""
	if f.Cursor != "" {
		c := cursor.Read(f.Cursor, cursor.Tasks)
		if after = c.String(validTaskID); c.Err() != nil {
			return nil, c.Err()
		}
	}
	queues, err := r.storageNames(ctx, f.Queue)
	if err != nil {
		return nil, err
	}
	filtered := f.Status != "" || f.Type != ""
	scan := f.Limit
	if filtered {
		scan = maxExamined
	}
	if len(queues) == 0 {
		return &dtqtype.ListResult[*dtqtype.TaskInfo]{}, nil // no queue yet: nothing to list
	}
	// Newest ids of each queue below the cursor, merged by id (ids sort by
	// time), and the queues' numbers, which complete the ids.
	pages, nums, err := r.listPages(ctx, queues, after, scan+1)
	if err != nil {
		return nil, err
	}
	suffixes := idSuffixes(nums)
	type cand struct{ id, queue string }
	var cands []cand
	for i, page := range pages {
		for _, m := range page {
			if after != "" && m >= recentMember(after) {
				continue // out of creation order (producers' clocks differ): paged already
			}
			id := m
			if len(m) == recentMemberLen {
				id += suffixes[i]
			}
			cands = append(cands, cand{id, queues[i]})
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a].id > cands[b].id })
	more := len(cands) > scan
	if more {
		cands = cands[:scan]
	}

	next := ""
	if filtered && len(cands) > 0 {
		// Cheap pass on status and type before reading whole hashes.
		pipe := r.c.Pipeline()
		hm := make([]*redis.SliceCmd, len(cands))
		for i, c := range cands {
			hm[i] = pipe.HMGet(ctx, r.keys.Task(c.queue, c.id), "status", "type")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		var kept []cand
		last := len(cands) - 1
		for i, c := range cands {
			v := hm[i].Val()
			st, _ := v[0].(string)
			ty, _ := v[1].(string)
			if st != "" && (f.Status == "" || st == string(f.Status)) && (f.Type == "" || ty == f.Type) {
				kept = append(kept, c)
				if len(kept) == f.Limit {
					last = i
					break
				}
			}
		}
		if more || last < len(cands)-1 {
			next = cands[last].id // resume after the last entry looked at
		}
		cands = kept
	} else if more && len(cands) > 0 {
		next = cands[len(cands)-1].id
	}

	pipe := r.c.Pipeline()
	hs := make([]*redis.MapStringStringCmd, len(cands))
	rs := make([]*redis.StringCmd, len(cands))
	for i, c := range cands {
		hs[i] = pipe.HGetAll(ctx, r.keys.Task(c.queue, c.id))
		rs[i] = pipe.Get(ctx, r.keys.Result(c.queue, c.id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	refs := make([]taskRef, len(cands))
	for i, c := range cands {
		refs[i] = taskRef{c.queue, c.id, hs[i].Val()}
	}
	if err := r.withBodies(ctx, refs); err != nil {
		return nil, err
	}
	out := make([]*dtqtype.TaskInfo, 0, len(cands))
	for i, c := range cands {
		if len(hs[i].Val()) == 0 {
			continue // retention removed it; the index trims lazily
		}
		var res *string
		if s, err := rs[i].Result(); err == nil {
			res = &s
		}
		out = append(out, decodeTask(c.queue, c.id, hs[i].Val(), res))
	}
	res := &dtqtype.ListResult[*dtqtype.TaskInfo]{Items: out}
	if next != "" {
		res.NextCursor = cursor.Encode(cursor.Tasks, next)
	}
	return res, nil
}

// listPages reads, for each queue, up to count members of its listing
// index older than cursor ("" = the newest), and the queues' numbers. A
// page after a cursor is found by list_page's binary search. Script calls
// in a pipeline are not retried on NOSCRIPT, so the scripts are loaded and
// the pipeline sent again once.
func (r *RDB) listPages(ctx context.Context, queues []string, cursor string, count int) ([][]string, []any, error) {
	s := scriptListPage.rs
	for try := 0; ; try++ {
		pipe := r.c.Pipeline()
		cmds := make([]redis.Cmder, len(queues))
		for i, q := range queues {
			if cursor == "" {
				cmds[i] = pipe.LRange(ctx, r.keys.Recent(q), 0, int64(count-1))
				continue
			}
			keys, args, err := listPageBuild(&listPageKeys{Recent: r.keys.Recent(q)},
				&listPageArgs{Cursor: recentMember(cursor), Count: count})
			if err != nil {
				return nil, nil, err
			}
			cmds[i] = s.EvalSha(ctx, pipe, keys, args...)
		}
		nums := pipe.HMGet(ctx, r.keys.Queues(), queues...)
		_, err := pipe.Exec(ctx)
		if err != nil && try == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := s.Load(ctx, r.c).Err(); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, err
		}
		pages := make([][]string, len(queues))
		for i, c := range cmds {
			switch c := c.(type) {
			case *redis.StringSliceCmd:
				pages[i] = c.Val()
			case *redis.Cmd:
				if errors.Is(c.Err(), redis.Nil) {
					continue
				}
				if pages[i], err = listPageDecode(c.Val()); err != nil {
					return nil, nil, err
				}
			}
		}
		return pages, nums.Val(), nil
	}
}

// RecentCompletions returns how many tasks of queue finished (succeeded,
// failed or dead-lettered) in the last full minute, from the per-minute
// counters the finalize scripts keep.
func (r *RDB) RecentCompletions(ctx context.Context, queue string, now time.Time) (int64, error) {
	minute := now.Unix()/60 - 1
	v, err := r.c.HMGet(ctx, r.keys.Stats(queue, minute), "succeeded", "failed", "dead_lettered").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, x := range v {
		if s, ok := x.(string); ok {
			total += atoi64(s)
		}
	}
	return total, nil
}

// readTask reads the task hash and result of id in queue; queue "" reads
// nothing (an empty hash: not found).
func (r *RDB) readTask(ctx context.Context, queue, id string) (*redis.MapStringStringCmd, *redis.StringCmd, error) {
	if queue == "" {
		return &redis.MapStringStringCmd{}, &redis.StringCmd{}, nil
	}
	pipe := r.c.Pipeline()
	h := pipe.HGetAll(ctx, r.keys.Task(queue, id))
	res := pipe.Get(ctx, r.keys.Result(queue, id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	return h, res, nil
}
