package rdb_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDueSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.now
	at := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	put := func(name string, next int64) {
		t.Helper()
		_, _, _, err := b.r.PutSchedule(b.ctx, name, now, next, []any{"spec", "@every 1m", "task_type", "echo"})
		require.NoError(t, err)
	}
	names := func(hs []map[string]string) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h["name"])
		}
		return out
	}

	due, next, err := b.r.DueSchedules(b.ctx, now, 10)
	require.NoError(t, err)
	require.Empty(t, due)
	require.Zero(t, next, "no schedule: nothing waits")

	put("late", at(-time.Minute))
	put("now", at(0))
	put("soon", at(5*time.Second))
	put("later", at(time.Hour))

	tests := []struct {
		name     string
		at       time.Time
		limit    int
		wantDue  []string
		wantNext int64
	}{
		{"due at or before now, earliest first", now, 10, []string{"late", "now"}, at(5 * time.Second)},
		{"limit caps the due", now, 1, []string{"late"}, at(5 * time.Second)},
		{"before any", now.Add(-2 * time.Minute), 10, nil, at(-time.Minute)},
		{"all due", now.Add(2 * time.Hour), 10, []string{"late", "now", "soon", "later"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, next, err := b.r.DueSchedules(b.ctx, tt.at, tt.limit)
			require.NoError(t, err)
			require.Equal(t, tt.wantDue, names(due))
			require.Equal(t, tt.wantNext, next)
			for _, h := range due {
				require.Equal(t, "@every 1m", h["spec"], "the whole hash is returned")
				require.Equal(t, "echo", h["task_type"])
			}
		})
	}

	t.Run("paused schedules are not running", func(t *testing.T) {
		_, err := b.r.SetSchedulePaused(b.ctx, "soon", true, now, 0)
		require.NoError(t, err)
		due, next, err := b.r.DueSchedules(b.ctx, now.Add(10*time.Second), 10)
		require.NoError(t, err)
		require.Equal(t, []string{"late", "now"}, names(due))
		require.Equal(t, at(time.Hour), next)
	})
	t.Run("a deleted schedule's leftover due entry is skipped", func(t *testing.T) {
		// The due index and the hash live apart; a hash gone since the
		// index was read answers nothing rather than an empty schedule.
		require.NoError(t, b.c.Del(b.ctx, b.keys.ScheduleDef("late")).Err())
		due, _, err := b.r.DueSchedules(b.ctx, now, 10)
		require.NoError(t, err)
		require.Equal(t, []string{"now"}, names(due))
		require.NoError(t, b.c.ZScore(b.ctx, b.keys.ScheduleDue(), "late").Err(), "the due entry was there")
	})
}

func TestAppendSysEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.r.AppendSysEvent(b.ctx, 100, []any{"type", "QUEUE_PAUSED", "queue", "q"}))
	require.NoError(t, b.r.AppendSysEvent(b.ctx, 100, []any{"type", "QUEUE_RESUMED", "queue", "q"}))
	evs, err := b.c.XRange(b.ctx, b.keys.SysEvents(), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, map[string]any{"type": "QUEUE_PAUSED", "queue": "q"}, evs[0].Values)
	require.Equal(t, map[string]any{"type": "QUEUE_RESUMED", "queue": "q"}, evs[1].Values)

	// The cap is approximate (whole stream nodes of 100 entries go), so
	// the stream stays within maxLen plus one node.
	for i := range 500 {
		require.NoError(t, b.r.AppendSysEvent(b.ctx, 10, []any{"n", strconv.Itoa(i)}))
	}
	n, err := b.c.XLen(b.ctx, b.keys.SysEvents()).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(10))
	require.LessOrEqual(t, n, int64(10+100))

	require.Error(t, b.r.AppendSysEvent(b.ctx, 10, []any{"odd"}), "fields come in pairs")
}
