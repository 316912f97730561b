package rdb

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schedule hashes are returned as their raw fields (see docs/redis-keys.md);
// the dtq package decodes them.

// PutSchedule creates or replaces schedule name with the definition fields
// (pairs), due first at nextRun. It reports whether the schedule is new,
// its new version and whether it is paused.
func (r *RDB) PutSchedule(ctx context.Context, name string, now time.Time, nextRun int64, def []any) (created bool, version int64, paused bool, err error) {
	k := r.keys
	v, err := r.callSchedulePut(ctx, &schedulePutKeys{Def: k.ScheduleDef(name), Names: k.ScheduleNames(), Due: k.ScheduleDue()},
		&schedulePutArgs{Now: now.UnixMilli(), Name: name, NextRun: nextRun, Def: def})
	return v.Created == 1, v.Version, v.Paused == 1, err
}

// DeleteSchedule removes schedule name and reports whether it existed.
func (r *RDB) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	k := r.keys
	n, err := r.callScheduleDelete(ctx, &scheduleDeleteKeys{Def: k.ScheduleDef(name), Names: k.ScheduleNames(), Due: k.ScheduleDue()},
		&scheduleDeleteArgs{Name: name})
	return n == 1, err
}

// SetSchedulePaused pauses or resumes schedule name; a resumed schedule is
// next due at nextRun. It answers ErrNotFound for an unknown schedule and
// reports whether the state changed.
func (r *RDB) SetSchedulePaused(ctx context.Context, name string, pause bool, now time.Time, nextRun int64) (bool, error) {
	k := r.keys
	action := "resume"
	if pause {
		action = "pause"
	}
	n, err := r.callSchedulePause(ctx, &schedulePauseKeys{Def: k.ScheduleDef(name), Due: k.ScheduleDue()},
		&schedulePauseArgs{Now: now.UnixMilli(), Action: action, Name: name, NextRun: nextRun})
	if err != nil {
		return false, err
	}
	if n < 0 {
		return false, ErrNotFound
	}
	return n == 1, nil
}

// ScheduleRun is what a scheduler or a manual trigger did, for
// RecordSchedule.
type ScheduleRun struct {
	Name string
	// Tick is the tick fired (epoch ms); 0 for a manual trigger.
	Tick int64
	// NextRun is the tick after Tick (epoch ms); ignored for a trigger.
	NextRun int64
	// Version is the definition version the scheduler read.
	Version string
	// TaskID is the tick's task ("" when none was made).
	TaskID string
	// Error says why no task was made ("" when one was).
	Error string
}

// Outcomes of RecordSchedule.
const (
	ScheduleRecorded = "recorded"
	ScheduleStale    = "stale"
)

// RecordSchedule records a run with a forward-only compare-and-set (see
// schedule_record.lua). It answers ScheduleRecorded, ScheduleStale or
// ErrNotFound.
func (r *RDB) RecordSchedule(ctx context.Context, now time.Time, run ScheduleRun) (string, error) {
	k := r.keys
	mode := "tick"
	if run.Tick == 0 {
		mode = "trigger"
	}
	v, err := r.callScheduleRecord(ctx, &scheduleRecordKeys{Def: k.ScheduleDef(run.Name), Due: k.ScheduleDue()},
		&scheduleRecordArgs{
			Now: now.UnixMilli(), Mode: mode, Name: run.Name, Tick: run.Tick, NextRun: run.NextRun, Version: run.Version,
			TaskID: run.TaskID, Error: run.Error,
		})
	if err != nil {
		return "", err
	}
	if v == "not_found" {
		return "", ErrNotFound
	}
	return v, nil
}

// GetSchedule returns the fields of schedule name, or ErrNotFound.
func (r *RDB) GetSchedule(ctx context.Context, name string) (map[string]string, error) {
	m, err := r.c.HGetAll(ctx, r.keys.ScheduleDef(name)).Result()
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, ErrNotFound
	}
	return m, nil
}

// ListSchedules returns up to limit schedules in name order, starting after
// the name after ("" = from the first), and the name to continue after (""
// at the end). A schedule deleted between the two reads is left out.
func (r *RDB) ListSchedules(ctx context.Context, after string, limit int) ([]map[string]string, string, error) {
	from := "-"
	if after != "" {
		from = "(" + after
	}
	names, err := r.c.ZRangeByLex(ctx, r.keys.ScheduleNames(), &redis.ZRangeBy{Min: from, Max: "+", Count: int64(limit) + 1}).Result()
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out, err := r.scheduleHashes(ctx, names)
	return out, next, err
}

// DueSchedules returns up to limit running schedules whose next tick is at
// or before now, and the next tick of the others (0 when none is waiting).
func (r *RDB) DueSchedules(ctx context.Context, now time.Time, limit int) ([]map[string]string, int64, error) {
	k := r.keys
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	pipe := r.c.Pipeline()
	due := pipe.ZRangeByScore(ctx, k.ScheduleDue(), &redis.ZRangeBy{Min: "-inf", Max: ms, Count: int64(limit)})
	later := pipe.ZRangeByScoreWithScores(ctx, k.ScheduleDue(), &redis.ZRangeBy{Min: "(" + ms, Max: "+inf", Count: 1})
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, err
	}
	var next int64
	if l := later.Val(); len(l) > 0 {
		next = int64(l[0].Score)
	}
	out, err := r.scheduleHashes(ctx, due.Val())
	return out, next, err
}

func (r *RDB) scheduleHashes(ctx context.Context, names []string) ([]map[string]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, r.keys.ScheduleDef(n))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(names))
	for _, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// AppendSysEvent appends one event (field, value pairs) to the _sys event
// stream, capped at maxLen.
func (r *RDB) AppendSysEvent(ctx context.Context, maxLen int64, fields []any) error {
	return r.c.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.SysEvents(), MaxLen: maxLen, Approx: true, Values: fields}).Err()
}
