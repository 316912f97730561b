package rdb_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
)

func TestTaskStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, st := range rdbtest.States {
		t.Run(string(st), func(t *testing.T) {
			// One queue per state: each state the factory reaches by a
			// claim needs its task to be the next one delivered.
			q := "status-" + string(st)
			m := b.f.Make(t, st, rdbtest.Task{Queue: q, Now: b.now})
			got, err := b.r.TaskStatus(b.ctx, q, m.ID)
			require.NoError(t, err)
			require.Equal(t, st, got)
		})
	}

	t.Run("unknown task", func(t *testing.T) {
		num, err := b.r.QueueNumber(b.ctx, "status-none")
		require.NoError(t, err)
		got, err := b.r.TaskStatus(b.ctx, "status-none", rdb.NewTaskID(num, b.now))
		require.NoError(t, err)
		require.Equal(t, dtqtype.Status(""), got)
	})
	t.Run("another queue's task", func(t *testing.T) {
		m := b.f.Make(t, dtqtype.StatusQueued, rdbtest.Task{Queue: "status-mine", Now: b.now})
		got, err := b.r.TaskStatus(b.ctx, "status-other", m.ID)
		require.NoError(t, err)
		require.Equal(t, dtqtype.Status(""), got, "a task is looked up in the queue given")
	})
}

func TestRecentCompletions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "recent"
	// Finished at b.now: one of each ending the counters keep, and tasks
	// that did not finish.
	for _, st := range []dtqtype.Status{dtqtype.StatusSucceeded, dtqtype.StatusFailed, dtqtype.StatusDeadLettered,
		dtqtype.StatusSucceeded, dtqtype.StatusRetrying, dtqtype.StatusRunning, dtqtype.StatusQueued} {
		b.f.Make(t, st, rdbtest.Task{Queue: q, Now: b.now})
	}

	tests := []struct {
		name  string
		queue string
		at    time.Time
		want  int64
	}{
		{"the minute after counts the finished", q, b.now.Add(time.Minute), 4},
		{"the current minute is not full yet", q, b.now, 0},
		{"two minutes later the minute is past", q, b.now.Add(2 * time.Minute), 0},
		{"a queue without tasks", "recent-empty", b.now.Add(time.Minute), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := b.r.RecentCompletions(b.ctx, tt.queue, tt.at)
			require.NoError(t, err)
			require.Equal(t, tt.want, n)
		})
	}
}

func TestMinuteRange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, st := range []dtqtype.Status{dtqtype.StatusSucceeded, dtqtype.StatusSucceeded, dtqtype.StatusRetrying} {
		b.f.Make(t, st, rdbtest.Task{Queue: "mr-a", Now: b.now})
	}
	b.f.Make(t, dtqtype.StatusDeadLettered, rdbtest.Task{Queue: "mr-b", Now: b.now})
	b.f.Make(t, dtqtype.StatusCancelled, rdbtest.Task{Queue: "mr-b", Now: b.now})

	m := b.now.Unix() / 60
	got, err := b.r.MinuteRange(b.ctx, []string{"mr-a", "mr-b", "mr-none"}, m-1, m+1)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, q := range got {
		require.Len(t, q, 3, "queue %d: one entry per minute", i)
		for j, ms := range q {
			require.Equal(t, dtqtype.MillisTime((m-1+int64(j))*60000), ms.Minute, "oldest minute first")
		}
		for _, j := range []int{0, 2} {
			require.Zero(t, q[j].Started+q[j].Succeeded+q[j].Retried+q[j].DeadLettered+q[j].Cancelled,
				"queue %d: nothing happened in minute %d", i, j)
		}
	}
	a, bq, none := got[0][1], got[1][1], got[2][1]
	require.EqualValues(t, 3, a.Started)
	require.EqualValues(t, 2, a.Succeeded)
	require.EqualValues(t, 1, a.Retried)
	require.EqualValues(t, 1, bq.Started)
	require.EqualValues(t, 1, bq.DeadLettered)
	require.EqualValues(t, 1, bq.Cancelled)
	require.Equal(t, dtqtype.MinuteStats{Minute: none.Minute, WaitBuckets: map[string]int64{}, RunBuckets: map[string]int64{}}, *none)

	empty, err := b.r.MinuteRange(b.ctx, nil, m, m)
	require.NoError(t, err)
	require.Empty(t, empty)
	reversed, err := b.r.MinuteRange(b.ctx, []string{"mr-a"}, m+1, m)
	require.NoError(t, err)
	require.Equal(t, [][]*dtqtype.MinuteStats{{}}, reversed, "an empty range reads nothing")
}
