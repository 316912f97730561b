package rdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
)

func TestQueuesExist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.f.Make(t, dtqtype.StatusQueued, rdbtest.Task{Queue: "has-task", Now: b.now})
	_, err := b.r.QueueNumber(b.ctx, "registered")
	require.NoError(t, err)

	tests := []struct {
		name   string
		queues []string
		want   []bool
	}{
		{"none asked", nil, nil},
		{"registered by a submission", []string{"has-task"}, []bool{true}},
		{"in the order asked", []string{"missing", "registered", "has-task", "missing"}, []bool{false, true, true, false}},
		{"unknown only", []string{"nope"}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.r.QueuesExist(b.ctx, tt.queues)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestGetLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name string
		set  *dtqtype.QueueLimits
		want *dtqtype.QueueLimits
	}{
		{"none set", nil, nil},
		{"nothing set", &dtqtype.QueueLimits{}, nil},
		{"concurrency", &dtqtype.QueueLimits{Concurrency: 3}, &dtqtype.QueueLimits{Concurrency: 3}},
		{"rate with the default burst", &dtqtype.QueueLimits{Rate: rate(10, time.Second, 0)},
			&dtqtype.QueueLimits{Rate: rate(10, time.Second, 1)}},
		{"every limit", &dtqtype.QueueLimits{Rate: rate(5, time.Minute, 4), Concurrency: 2, KeyConcurrency: 1},
			&dtqtype.QueueLimits{Rate: rate(5, time.Minute, 4), Concurrency: 2, KeyConcurrency: 1}},
		{"a burst without a rate is not kept", &dtqtype.QueueLimits{Rate: rate(0, 0, 7), KeyConcurrency: 2},
			&dtqtype.QueueLimits{KeyConcurrency: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := "limits-" + tt.name
			if tt.set != nil {
				_, err := b.r.SetLimits(b.ctx, q, tt.set)
				require.NoError(t, err)
			}
			got, err := b.r.GetLimits(b.ctx, q)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("replaced and removed", func(t *testing.T) {
		const q = "limits-changing"
		_, err := b.r.SetLimits(b.ctx, q, &dtqtype.QueueLimits{Rate: rate(1, time.Second, 0), Concurrency: 9})
		require.NoError(t, err)
		_, err = b.r.SetLimits(b.ctx, q, &dtqtype.QueueLimits{KeyConcurrency: 2})
		require.NoError(t, err)
		got, err := b.r.GetLimits(b.ctx, q)
		require.NoError(t, err)
		require.Equal(t, &dtqtype.QueueLimits{KeyConcurrency: 2}, got, "SetLimits replaces every field")

		existed, err := b.r.SetLimits(b.ctx, q, nil)
		require.NoError(t, err)
		require.True(t, existed)
		got, err = b.r.GetLimits(b.ctx, q)
		require.NoError(t, err)
		require.Nil(t, got)
	})
}

func rate(limit int, period time.Duration, burst int) *dtqtype.RateLimit {
	return &dtqtype.RateLimit{Limit: limit, Period: dtqtype.Duration(period), Burst: burst}
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "wait"
	first := b.f.Make(t, dtqtype.StatusQueued, rdbtest.Task{Queue: q, Now: b.now})
	require.NoError(t, b.r.EnsureGroups(b.ctx, q))
	cr, err := b.r.Claim(b.ctx, q, b.f.Settings, 10, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	require.Equal(t, first.ID, cr.Tasks[0].ID)
	require.Len(t, cr.LastIDs, rdb.NumBands, "the bands ran out: the claim says where to wait from")

	t.Run("nothing newer: waits out block", func(t *testing.T) {
		start := time.Now()
		require.NoError(t, b.r.WaitReady(b.ctx, q, cr.LastIDs, 100*time.Millisecond))
		require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	})
	t.Run("an entry the ids do not cover returns at once", func(t *testing.T) {
		// A claim deletes what it delivers: a queue of its own keeps an
		// undelivered entry.
		const q = "wait-undelivered"
		b.f.Make(t, dtqtype.StatusQueued, rdbtest.Task{Queue: q, Now: b.now, Priority: 4})
		zero := make([]string, rdb.NumBands)
		for i := range zero {
			zero[i] = "0-0"
		}
		start := time.Now()
		require.NoError(t, b.r.WaitReady(b.ctx, q, zero, time.Minute))
		require.Less(t, time.Since(start), 30*time.Second)
	})
	t.Run("without one id per band it does not wait", func(t *testing.T) {
		start := time.Now()
		require.NoError(t, b.r.WaitReady(b.ctx, q, cr.LastIDs[:3], time.Minute))
		require.Less(t, time.Since(start), 30*time.Second)
	})
	t.Run("a submission wakes a waiter", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- b.r.WaitReady(b.ctx, q, cr.LastIDs, time.Minute) }()
		// The ids say where to wait from: a task submitted before the
		// waiter blocks wakes it as well as one submitted after.
		b.f.Make(t, dtqtype.StatusQueued, rdbtest.Task{Queue: q, Now: b.now, Priority: 9})
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("WaitReady did not return within 30s of a submission")
		}
	})
	t.Run("the context ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		require.ErrorIs(t, b.r.WaitReady(ctx, q, cr.LastIDs, time.Minute), context.Canceled)
	})
}
