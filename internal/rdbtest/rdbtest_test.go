package rdbtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestMake checks that each state is stored where the scripts keep it
// (docs/redis-keys.md): the indexes a task of that state is in.
func TestMake(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	r := rdb.New(s.Client, s.Prefix)
	f := rdbtest.New(r)
	k := r.Keys()
	ctx := context.Background()
	now := time.Now()

	tests := []struct {
		status    dtqtype.Status
		schedule  bool // in the schedule ZSET
		lease     bool // in the lease ZSET
		dlq       bool
		depth     int64
		attempt   int
		lastError bool
	}{
		{status: dtqtype.StatusPending, schedule: true, depth: 1, attempt: 1},
		{status: dtqtype.StatusQueued, depth: 1, attempt: 1},
		{status: dtqtype.StatusRunning, lease: true, depth: 1, attempt: 1},
		{status: dtqtype.StatusRetrying, schedule: true, depth: 1, attempt: 1, lastError: true},
		{status: dtqtype.StatusSucceeded, attempt: 1},
		{status: dtqtype.StatusFailed, attempt: 1, lastError: true},
		{status: dtqtype.StatusDeadLettered, dlq: true, attempt: 1, lastError: true},
		{status: dtqtype.StatusCancelled, attempt: 1},
		{status: dtqtype.StatusExpired, attempt: 1},
	}
	require.Len(t, tests, len(rdbtest.States), "every state the factory makes is checked")
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			q := "make-" + string(tt.status)
			m := f.Make(t, tt.status, rdbtest.Task{Queue: q, Now: now, Priority: 3, Payload: []byte(`{"n":1}`)})
			require.Equal(t, q, m.Queue)
			require.Equal(t, tt.status, m.Task.Status)
			require.Equal(t, "echo", m.Task.Type)
			require.Equal(t, tt.attempt, m.Task.Attempt)
			var class string
			for _, a := range m.Task.Attempts {
				class = a.ErrorClass
			}
			require.Equal(t, tt.lastError, class == "handler_error", "attempts: %+v", m.Task.Attempts)

			inZ := func(key string) bool { return s.Client.ZScore(ctx, key, m.ID).Err() == nil }
			require.Equal(t, tt.schedule, inZ(k.Schedule(q)), "schedule")
			require.Equal(t, tt.lease, inZ(k.Lease(q)), "lease")
			depth, _ := s.Client.Get(ctx, k.Depth(q)).Int64()
			require.Equal(t, tt.depth, depth, "depth counts the non-terminal tasks")
			dlq, err := s.Client.ZRange(ctx, k.DLQ(q), 0, -1).Result()
			require.NoError(t, err)
			require.Equal(t, tt.dlq, len(dlq) == 1, "dlq: %v", dlq)
			if tt.status == dtqtype.StatusRunning {
				require.NotNil(t, m.Claimed)
				require.Equal(t, m.ID, m.Claimed.ID)
				_, err := f.R.RenewLeases(ctx, q, f.Settings, now, []rdb.LeaseRef{{ID: m.ID, Attempt: m.Claimed.Attempt}})
				require.NoError(t, err, "the factory's worker holds the lease")
			}
		})
	}
}
